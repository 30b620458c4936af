"""The S3 store behind a failing proxy, call by call: a conditional write whose answer was
lost after the server applied it is this writer's success (not a conflict), a dropped
connection is retried, a real conflict still fails, and every retry is counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.errors import PreconditionFailed
from infra.retries import RETRIES
from infra.store import S3Store
from tests.fakes.faults import fault_proxy
from tests.procs import s3_server

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with s3_server("flywheel-store-faults") as endpoint:
        yield endpoint


def _store(url: str, prefix: str) -> S3Store:
    return S3Store(
        f"s3://flywheel-store-faults/{prefix}",
        endpoint_url=url,
        access_key_id="testing",
        secret_access_key="testing",
    )


def test_a_conditional_write_applied_but_unanswered_is_a_success(s3: str) -> None:
    put = frozenset({"PUT"})
    with fault_proxy(s3, rate=1.0, seed=1, kinds=("after",), methods=put, max_faults=1) as proxy:
        proxy.enabled = False
        store = _store(proxy.url, "after")
        etag = store.put_if("deploy/state.json", b"v1", etag=None)
        before = RETRIES.snapshot().get("store.put", 0)
        proxy.enabled = True

        new = store.put_if("deploy/state.json", b"v2", etag=etag)  # applied, answered 503

        assert proxy.faults["after"] == 1
        assert store.get_versioned("deploy/state.json") == (b"v2", new)
        assert RETRIES.snapshot().get("store.put", 0) == before + 1


def test_a_real_conflict_still_fails(s3: str) -> None:
    with fault_proxy(s3, rate=0.0, seed=2) as proxy:
        store = _store(proxy.url, "conflict")
        etag = store.put_if("deploy/state.json", b"v1", etag=None)
        store.put("deploy/state.json", b"someone else")
        with pytest.raises(PreconditionFailed):
            store.put_if("deploy/state.json", b"v2", etag=etag)


def test_dropped_connections_and_5xx_are_retried_and_counted(s3: str) -> None:
    with fault_proxy(s3, rate=0.3, seed=3, kinds=("before", "after", "reset")) as proxy:
        store = _store(proxy.url, "flaky")
        before = sum(n for op, n in RETRIES.snapshot().items() if op.startswith("store."))
        for i in range(30):
            store.put(f"objects/{i}", str(i).encode())
        proxy.enabled = False
        assert [store.get(f"objects/{i}") for i in range(30)] == [
            str(i).encode() for i in range(30)
        ]
        after = sum(n for op, n in RETRIES.snapshot().items() if op.startswith("store."))
        assert after - before >= sum(proxy.faults.values()) > 0
