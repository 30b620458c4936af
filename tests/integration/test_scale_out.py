"""Scale-out: the task runner is a setting, and curate on a local Dask cluster writes the same
training_examples as curate on threads."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from infra.catalog import open_catalog, scan
from infra.errors import MissingDependencyError
from infra.settings import get_settings
from infra.store import open_store
from tests.data.pii_corpus import generate, plant_window

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def _rows(settings) -> list[dict]:
    rows = scan(open_catalog(settings), "training_examples").to_pylist()
    return sorted(rows, key=lambda r: r["trace_id"])


def test_ray_without_prefect_ray_says_how_to_install(monkeypatch):
    import sys

    from infra.runners import task_runner

    monkeypatch.setitem(sys.modules, "prefect_ray", None)  # as if it were not installed
    monkeypatch.setenv("FLYWHEEL_TASK_RUNNER", "ray")
    get_settings.cache_clear()
    try:
        with pytest.raises(MissingDependencyError, match="pip install prefect-ray"):
            task_runner(get_settings())
    finally:
        get_settings.cache_clear()


def test_unknown_runner_is_refused_by_the_settings(monkeypatch):
    from infra.errors import ConfigError

    monkeypatch.setenv("FLYWHEEL_TASK_RUNNER", "spark")
    get_settings.cache_clear()
    try:  # refused in one line that names the variable (issue 13), not a pydantic traceback
        with pytest.raises(ConfigError, match="FLYWHEEL_TASK_RUNNER.*'spark'"):
            get_settings()
    finally:
        get_settings.cache_clear()


@pytest.mark.integration
@pytest.mark.slow
def test_curate_on_local_dask_equals_curate_on_threads(prefect_api, flywheel_home, monkeypatch):
    import psutil
    from prefect_dask import DaskTaskRunner

    from flows.curate import curate

    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")  # every row reaches the table
    monkeypatch.setenv("FLYWHEEL_CURATE__BATCH_SIZE", "4")  # 32 traces a chunk: several chunks
    monkeypatch.setenv("FLYWHEEL_TASK_RUNNER", "threads")
    get_settings.cache_clear()
    settings = get_settings()
    plant_window(open_store(settings), T0, generate(40, seed=3), users=8)

    clusters = []  # the local Dask clusters curate started, seen as each runner exits
    real_exit = DaskTaskRunner.__exit__

    def exit_and_record(self, *args):
        clusters.append(self._cluster)
        real_exit(self, *args)

    monkeypatch.setattr(DaskTaskRunner, "__exit__", exit_and_record)

    began = time.perf_counter()
    on_threads = curate(window_start=T0)
    threads_s = time.perf_counter() - began
    expected = _rows(settings)
    assert on_threads.written == len(expected) > 64  # more than two chunks of work

    monkeypatch.setenv("FLYWHEEL_TASK_RUNNER", "dask")
    get_settings.cache_clear()
    children_before = {p.pid for p in psutil.Process().children(recursive=True)}
    began = time.perf_counter()
    on_dask = curate(window_start=T0)
    dask_s = time.perf_counter() - began
    print(f"\ncurate {len(expected)} rows: threads {threads_s:.1f} s, local dask {dask_s:.1f} s")

    assert len(clusters) == 1  # threads never made one; dask made one, and closed it
    cluster = clusters[0]
    assert cluster is not None and cluster.scheduler_address.startswith("tcp://127.0.0.1:")
    assert cluster.status.name == "closed"
    leftover = {p.pid for p in psutil.Process().children(recursive=True)} - children_before
    alive = [cmd for cmd in map(_cmdline, leftover) if cmd and "resource_tracker" not in cmd]
    assert not alive, f"processes left running after the Dask run: {alive}"

    assert _rows(settings) == expected
    assert on_dask.written == on_threads.written
    assert on_dask.pii_entities == on_threads.pii_entities
    assert on_dask.quarantined == on_threads.quarantined == 0


def _cmdline(pid: int) -> str:
    """The command line of a live child ('' once it has exited); the stdlib's
    multiprocessing resource tracker stays for the life of the test process by design."""
    import psutil

    try:
        proc = psutil.Process(pid)
        return "" if proc.status() == psutil.STATUS_ZOMBIE else " ".join(proc.cmdline())
    except psutil.NoSuchProcess:
        return ""


@contextmanager
def watched_ray(monkeypatch) -> Iterator[list[str]]:
    """Records the GCS address of every Ray cluster a RayTaskRunner starts itself (not one it
    found running), and checks that each was shut down when the runner exited."""
    import ray
    from prefect_ray import RayTaskRunner

    seen: list[str] = []
    real_enter, real_exit = RayTaskRunner.__enter__, RayTaskRunner.__exit__

    def enter(self):
        assert not ray.is_initialized()
        entered = real_enter(self)
        assert self._owns_ray
        seen.append(ray.get_runtime_context().gcs_address)
        return entered

    def exit_(self, *args):
        real_exit(self, *args)
        assert not ray.is_initialized()

    monkeypatch.setattr(RayTaskRunner, "__enter__", enter)
    monkeypatch.setattr(RayTaskRunner, "__exit__", exit_)
    yield seen


@pytest.mark.integration
@pytest.mark.slow
def test_curate_on_local_ray_equals_curate_on_threads(prefect_api, flywheel_home, monkeypatch):
    from flows.curate import curate

    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    monkeypatch.setenv("FLYWHEEL_CURATE__BATCH_SIZE", "4")  # several chunks of work
    monkeypatch.setenv("FLYWHEEL_TASK_RUNNER", "threads")
    get_settings.cache_clear()
    settings = get_settings()
    plant_window(open_store(settings), T0, generate(40, seed=3), users=8)
    on_threads = curate(window_start=T0)
    expected = _rows(settings)
    assert on_threads.written == len(expected) > 64

    monkeypatch.setenv("FLYWHEEL_TASK_RUNNER", "ray")
    get_settings.cache_clear()
    with watched_ray(monkeypatch) as clusters:
        on_ray = curate(window_start=T0)
    assert _rows(settings) == expected
    assert len(clusters) == 1  # a temporary local cluster, started and shut down by curate
    assert on_ray.written == on_threads.written
    assert on_ray.pii_entities == on_threads.pii_entities
    assert on_ray.quarantined == on_threads.quarantined == 0


def _collect_traces(n: int) -> None:
    from flows.collect import collect
    from infra.traces import SpoolWriter
    from tests.helpers import make_trace

    writer = SpoolWriter(open_store(get_settings()), writer_id="test")
    for i in range(n):
        extra = {"answer": str(i % 50 + i % 40 + 1)} if i % 3 == 1 else {}
        writer.write_trace(make_trace(i, T0, **extra))
    writer.flush()
    assert collect(window_start=T0, hours=1).written == n


def _scores() -> list[dict]:
    from tasks.datasets import read_scores

    table = read_scores(open_store(get_settings()), "2026-11-22T10:00:00Z")
    return sorted(table.to_pylist(), key=lambda r: r["trace_id"])


def _forget_cached_verdicts() -> None:
    """So the next run calls the judge again (on the cluster) instead of reading the cache."""
    from infra.keys import SCORES_CACHE_PREFIX

    store = open_store(get_settings())
    for key in list(store.list(SCORES_CACHE_PREFIX)):
        store.delete(key)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("runner", ["dask", "ray"])
def test_score_on_a_local_cluster_equals_score_on_threads(
    runner, prefect_api, flywheel_home, monkeypatch
):
    """Judge calls (the LLM judge over HTTP) and ragas run in the cluster's workers; the
    scores table is the thread runner's."""
    from flows.score import score
    from tests.fakes.judge_server import FakeJudgeServer

    monkeypatch.setattr("tasks.score_chunks.CHUNK_ITEMS", 8)  # 40 traces: 5 chunks
    with FakeJudgeServer(delay_s=0.0) as server:
        monkeypatch.setenv("FLYWHEEL_JUDGE__KIND", "llm")
        monkeypatch.setenv("FLYWHEEL_JUDGE__BASE_URL", server.base_url)
        monkeypatch.setenv("FLYWHEEL_TASK_RUNNER", "threads")
        get_settings.cache_clear()
        _collect_traces(40)
        on_threads = score(window_start=T0, hours=1)
        expected = _scores()
        threads_requests = server.requests
        assert on_threads.traces == 40 and threads_requests > 0

        _forget_cached_verdicts()
        monkeypatch.setenv("FLYWHEEL_TASK_RUNNER", runner)
        get_settings.cache_clear()
        if runner == "ray":
            with watched_ray(monkeypatch) as clusters:
                on_cluster = score(window_start=T0, hours=1)
            assert len(clusters) == 1
        else:
            on_cluster = score(window_start=T0, hours=1)
        cluster_requests = server.requests - threads_requests
    assert _scores() == expected
    assert cluster_requests == threads_requests  # every verdict computed again, on the cluster
    assert on_cluster.stats["judge_calls"] == on_threads.stats["judge_calls"] > 0
    assert on_cluster.reward_mean == on_threads.reward_mean
