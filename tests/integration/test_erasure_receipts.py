"""Receipts and cases are created, never replaced (issue 52, item 6): two forget-user
requests for one person that both look for a free receipt before either has recorded
anything get two receipts, and a case is written only where none is."""

from __future__ import annotations

import threading

import pytest

from infra.catalog import open_catalog
from infra.errors import PreconditionFailed
from infra.privacy import user_key
from infra.routing import RoutingState
from infra.settings import get_settings
from infra.store import open_store
from tasks.governance.reach import ErasureCase, create_case, load_case, new_case
from tasks.governance.receipts import forget_receipt, request_receipts

pytestmark = pytest.mark.integration


def test_two_requests_at_once_take_two_receipts(flywheel_home) -> None:
    settings = get_settings()
    store, catalog = open_store(settings), open_catalog(settings)
    key = user_key("alice@example.com", settings.salt())
    start = threading.Barrier(2)
    taken: list[tuple[str, list[str]]] = []

    def request() -> None:
        start.wait(timeout=60)
        taken.append(request_receipts(store, catalog, key))

    threads = [threading.Thread(target=request) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert sorted(r for r, _ in taken) == sorted([forget_receipt(key, 1), forget_receipt(key, 2)])
    second = next(earlier for r, earlier in taken if r == forget_receipt(key, 2))
    assert second == [forget_receipt(key, 1)]  # recorded as the same person's earlier request


def test_a_case_is_created_only_where_none_is(flywheel_home) -> None:
    store = open_store(get_settings())
    receipt = forget_receipt("a" * 64)

    def case(bake_s: float) -> ErasureCase:
        return new_case(
            receipt=receipt,
            reached={"v1": ("trained on 2 of their rows", None)},
            state=RoutingState(stable="v1"),
            bake_s=bake_s,
            deadline_days=7,
            stores={"tables": {"training_examples": 2}},
        )

    first = case(0)
    create_case(store, first)
    with pytest.raises(PreconditionFailed):
        create_case(store, case(0))
    assert load_case(store, receipt).requested_at == first.requested_at
