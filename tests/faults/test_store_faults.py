"""The S3 store behind a failing proxy, call by call: a conditional write whose answer was
lost after the server applied it is this writer's success (not a conflict), a dropped
connection is retried, a real conflict still fails, and every retry is counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from infra.errors import PreconditionFailed
from infra.retries import RETRIES
from infra.store import S3Store
from tests.fakes.faults import Aim, fault_proxy
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
    with fault_proxy(
        s3, rate=1.0, seed=1, kinds=("after",), aim=Aim(methods=put), max_faults=1
    ) as proxy:
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


def test_a_store_call_that_keeps_failing_in_a_task_is_tried_at_one_level(
    s3: str, prefect_api: None
) -> None:
    """A Prefect task with the I/O task options whose store read meets a 503 every time: the
    store's own budget (STORE_RETRIES, about 10 s) is the whole of it; the task does not run it
    again per task attempt (it did: up to 20 calls, and every step of the task re-run)."""
    from prefect import task

    from infra.errors import TransientStoreError
    from infra.retries import STORE_RETRIES
    from infra.task_retries import IO_RETRIES

    get = frozenset({"GET"})
    with fault_proxy(s3, rate=1.0, seed=4, kinds=("before",), aim=Aim(methods=get)) as proxy:
        store = _store(proxy.url, "down")
        runs: list[int] = []

        @task(**{**IO_RETRIES, "retry_delay_seconds": 0})
        def read_state() -> bytes:
            runs.append(1)
            return store.get("deploy/state.json")

        with pytest.raises(TransientStoreError):
            read_state()
    assert len(runs) == 1
    assert proxy.faults["before"] == STORE_RETRIES.attempts == 7


def test_a_transient_error_no_adapter_retried_is_retried_by_the_task(prefect_api: None) -> None:
    from prefect import task

    from infra.errors import TransientError
    from infra.task_retries import IO_RETRIES

    runs: list[int] = []

    @task(**{**IO_RETRIES, "retry_delay_seconds": 0})
    def stage() -> int:
        runs.append(1)
        if len(runs) < 3:
            raise TransientError("a lost race the task redoes as a whole")
        return len(runs)

    assert stage() == 3
