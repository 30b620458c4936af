"""Erasure that stays erased (issue 52, item 6), through real Prefect runs: a forget-user
that runs while curate is between its read of a window (and of the held rows) and its writes
does not see the user's rows written back, and two forget-user requests for one person at once
keep a case each. Each test makes the forget-user start at the worst moment: the hooks below
let it run (to its end, or until it waits for the erasure lease) before curate goes on."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from infra.catalog import append_rows, open_catalog, scan
from infra.keys import scores_key
from infra.lease import ERASURE_LEASE, Lease
from infra.privacy import user_key
from infra.routing import RoutingState, save_state
from infra.settings import get_settings
from infra.store import open_store
from infra.traces import SpoolWriter
from tests.data.pii_corpus import _REWARD_COLS
from tests.helpers import make_trace
from tests.integration.test_train_flow import _rows_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
WINDOW = "2026-11-22T10:00:00Z"
ALICE = "alice-zq"
WAIT_S = 600  # a bound for a hung run, never a measurement


@pytest.fixture
def lease_waits(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once a forget-user has to wait for the erasure lease (someone holds it)."""
    waiting = threading.Event()
    change = Lease._change

    def spy(self: Lease, update: Callable[[dict[str, Any]], bool], **kw: Any) -> bool:
        if self.key != ERASURE_LEASE or kw.get("mode") != "exclusive":
            return change(self, update, **kw)

        def watched(state: dict[str, Any]) -> bool:
            ok = update(state)
            if not ok:
                waiting.set()
            return ok

        return change(self, watched, **kw)

    monkeypatch.setattr(Lease, "_change", spy)
    return waiting


class Background:
    """A forget-user run on its own thread; ``settled`` once it ends or waits for the lease."""

    def __init__(self, waiting: threading.Event) -> None:
        self.waiting, self.result, self.error = waiting, None, None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        from flows.governance import forget_user_id

        def run() -> None:
            try:
                self.result = forget_user_id(ALICE)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.error = exc
            finally:
                self.waiting.set()

        self.thread = threading.Thread(target=run)
        self.thread.start()

    def settle(self) -> None:
        assert self.waiting.wait(WAIT_S), "forget-user neither ended nor waited"

    def join(self) -> Any:
        assert self.thread is not None
        self.thread.join(WAIT_S)
        assert self.error is None, self.error
        return self.result


def _plant_window(store: Any) -> None:
    """alice asks something nobody else does (held back by k = 2); bob and carol ask the same
    kind of question (released); collected and scored, not curated yet."""
    from flows.collect import collect
    from tasks.datasets import read_rollouts

    writer = SpoolWriter(store, writer_id="test")
    for i in range(9):
        user = (ALICE, "bob-kx", "carol-mv")[i % 3]
        own = {"question": f"Can I close zebraquartz account {i}?"} if user == ALICE else {}
        writer.write_trace(make_trace(i, T0, user_id=user, prompt_group=f"g-{i}", **own))
    writer.flush()
    collect(window_start=T0, hours=1)
    roll = read_rollouts(store, WINDOW)
    n = roll.num_rows
    cols = {"trace_id": roll["trace_id"], "prompt_group": roll["prompt_group"]}
    cols |= {c: [0.9] * n for c in _REWARD_COLS}
    cols |= {"missing": [[]] * n, "reward_config_hash": ["h"] * n, "window": [WINDOW] * n}
    sink = io.BytesIO()
    pq.write_table(pa.table(cols), sink)
    store.put(scores_key(WINDOW), sink.getvalue())


@pytest.fixture
def planted(prefect_api, flywheel_home, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "2")
    get_settings.cache_clear()
    settings = get_settings()
    store = open_store(settings)
    _plant_window(store)
    yield settings


def _assert_alice_gone(settings: Any) -> None:
    from tasks.curate.kanon import read_held

    store, catalog = open_store(settings), open_catalog(settings)
    alice = user_key(ALICE, settings.salt())
    held = read_held(store)
    assert alice not in {r["user_key"] for r in held}, "held rows restored"
    table = scan(catalog, "training_examples").to_pylist()
    assert len(table) == 6 and alice not in {r["user_key"] for r in table}  # bob and carol stay


def test_forget_user_during_curates_held_rows_step_is_not_undone(
    planted: Any, lease_waits: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.curate.kanon as kanon
    from flows.curate import curate

    forget = Background(lease_waits)
    read_held = kanon.read_held

    def racing_read(store: Any, **kw: Any) -> Any:
        rows = read_held(store, **kw)  # curate has read the held rows ...
        if forget.thread is None:
            forget.start()  # ... and a forget-user for alice starts now
            forget.settle()
        return rows

    monkeypatch.setattr(kanon, "read_held", racing_read)
    result = curate(window_start=T0)
    erased = forget.join()

    assert result.k_withheld == 3 and erased.found  # curate held alice's three rows back
    _assert_alice_gone(planted)


def test_forget_user_after_curate_read_consent_is_not_undone(
    planted: Any, lease_waits: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    import flows.curate as flow

    forget = Background(lease_waits)
    apply_gates = flow.apply_gates

    def racing_gates(*args: Any, **kw: Any) -> Any:
        gated = apply_gates(*args, **kw)  # consent was read: alice may still be trained on
        forget.start()
        forget.join()  # erased and tombstoned before curate writes anything
        return gated

    monkeypatch.setattr(flow, "apply_gates", racing_gates)
    flow.curate(window_start=T0)

    assert forget.result is not None and forget.result.found
    _assert_alice_gone(planted)


def test_two_forget_user_requests_at_once_keep_two_cases(
    prefect_api, flywheel_home, lease_waits: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tasks.governance.forget as forget
    import tasks.governance.receipts as receipts
    from tasks.governance.reach import load_case

    settings = get_settings()
    catalog, store = open_catalog(settings), open_store(settings)
    rows = _rows_for({ALICE: 2, "bob": 2}, WINDOW, settings.salt())
    append_rows(catalog, "training_examples", rows)
    store.put("models/v1/_COMPLETE", b'{"version": "v1", "files": {}}')
    store.put("models/v1/lineage.json", b"{}")
    save_state(store, RoutingState(stable="v1"))

    arrived, both = [], threading.Condition()
    request_receipts, open_case = receipts.request_receipts, forget.open_case

    def racing_receipts(*args: Any) -> Any:
        taken = request_receipts(*args)
        with both:  # both requests look for a free receipt before either records anything
            arrived.append(taken[0])
            both.notify_all()
            deadline = time.monotonic() + WAIT_S
            while not (len(arrived) == 2 or lease_waits.is_set()):  # the lease notifies nobody
                assert time.monotonic() < deadline, "the other request neither came nor waited"
                both.wait(0.05)
        return taken

    def case_then_alice_writes_again(*args: Any, **kw: Any) -> Any:
        case = open_case(*args, **kw)
        if len(cases) == 0:  # she chats once more before the other request reads
            writer = SpoolWriter(store, writer_id="test")
            writer.write_trace(make_trace(50, T0, user_id=ALICE, trace_id="alice-again"))
            writer.flush()
        cases.append(case.receipt)
        return case

    cases: list[str] = []
    monkeypatch.setattr(receipts, "request_receipts", racing_receipts)
    monkeypatch.setattr(forget, "open_case", case_then_alice_writes_again)
    runs = [Background(threading.Event()) for _ in range(2)]
    for run in runs:
        run.start()
    first, second = (run.join() for run in runs)

    assert first.found and second.found and first.receipt != second.receipt
    assert sorted(cases) == sorted([first.receipt, second.receipt])
    for receipt in cases:  # each request's case is its own
        assert load_case(store, receipt).receipt == receipt
