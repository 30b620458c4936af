"""Scale-out: the task runner is a setting, and curate on a local Dask cluster writes the same
training_examples as curate on threads."""

from __future__ import annotations

import time
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
    import importlib.util

    from infra.runners import task_runner

    if importlib.util.find_spec("prefect_ray") is not None:
        pytest.skip("prefect-ray is installed here")
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
