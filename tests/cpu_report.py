"""CPU seconds per test, for finding what makes ``make test`` long on two cores (where the
suite is CPU-bound, wall time per test says little: four workers share two cores).

    FLYWHEEL_TEST_CPU_REPORT=/tmp/cpu PYTEST_ADDOPTS="-p tests.cpu_report" make test

Each pytest process appends one JSON line per test phase to ``$FLYWHEEL_TEST_CPU_REPORT.<worker>``:
the node id, the phase (setup, call, teardown), wall seconds, this process's CPU seconds (all
its threads) and its reaped children's. Children still running (servers a module fixture
started) are counted at their teardown, when they are reaped. Not loaded by default."""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Generator

import pytest


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime


def _out() -> str | None:
    base = os.environ.get("FLYWHEEL_TEST_CPU_REPORT")
    if not base:
        return None
    return f"{base}.{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.{os.getpid()}"


def _record(item: pytest.Item, phase: str) -> Generator[None, None, None]:
    path = _out()
    t0, (s0, c0) = time.monotonic(), _cpu()
    yield
    if path is None:
        return
    s1, c1 = _cpu()
    row = {
        "test": item.nodeid,
        "phase": phase,
        "wall": round(time.monotonic() - t0, 3),
        "cpu": round(s1 - s0, 3),
        "children": round(c1 - c0, 3),
    }
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    yield from _record(item, "setup")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    yield from _record(item, "call")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    yield from _record(item, "teardown")
