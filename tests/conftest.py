"""Shared fixtures: one session-scoped Prefect ephemeral API, and an isolated FLYWHEEL_HOME
per test (settings cache cleared so every adapter sees the test's environment)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest

_SESSION_HOME = Path(tempfile.mkdtemp(prefix="flywheel-tests-"))
os.environ.setdefault("PREFECT_HOME", str(_SESSION_HOME / "prefect"))
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("MPLBACKEND", "Agg")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # two workers on two cores: a second torch/BLAS thread per worker only contends (training
    # at two threads beside another busy process runs several times slower than at one)
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
for _var in [
    v for v in os.environ if v.startswith("FLYWHEEL_") and not v.startswith("FLYWHEEL_TEST_")
]:
    del os.environ[_var]  # a developer's .env or shell must not leak into tests


def _one_tls_context() -> None:
    """Every httpx client the tests make shares one SSL context (:func:`infra.http.tls`): httpx
    reads the whole CA bundle for each client (about 30 ms of CPU), and the tests' one-off
    ``httpx.get``/``post`` on loopback, thousands of them, spent minutes of the suite's two
    cores on certificates (a quarter of the vLLM drill's CPU). Only the default verification
    is shared; a client asking for anything else gets its own context."""
    import httpx._transports.default as transports

    from infra.http import tls

    build = transports.create_ssl_context

    def create(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is True and cert is None and trust_env:
            return tls()
        return build(verify=verify, cert=cert, trust_env=trust_env)

    transports.create_ssl_context = create


_one_tls_context()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest files first, so the xdist workers (``--dist loadfile --no-loadscope-reorder``)
    end together instead of one finishing a 10-minute end-to-end file alone at the end: the
    file marked ``longest``, then the files with an ``e2e`` test; then the ``slow`` files,
    alternating with the files marked ``waits`` (mostly waiting on the clock), so that a waiting
    file runs beside busy ones instead of two waiting at once on two cores, and none is left for
    the end; then the rest. Each file's tests stay together and in their own order (module
    fixtures set up once)."""

    markers = ("longest", "e2e", "waits", "slow")  # a file's rank: its first marker here
    unmarked = len(markers)

    def rank(item: pytest.Item) -> int:
        return next((n for n, m in enumerate(markers) if item.get_closest_marker(m)), unmarked)

    files: dict[str, int] = {}
    for item in items:
        path = str(item.path)
        files[path] = min(files.get(path, unmarked), rank(item))
    first, e2e, waiting, busy, rest = (
        [f for f, r in files.items() if r == n] for n in range(unmarked + 1)
    )
    middle = [f for pair in zip_longest(busy, waiting) for f in pair if f is not None]
    order = {path: i for i, path in enumerate(first + e2e + middle + rest)}
    items.sort(key=lambda it: order[str(it.path)])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """In a run started below normal priority (``make test`` starts its workers at nice 14), a
    worker drops to nice 19 for good at its first test not marked ``longest``: the worker that
    runs the longest test keeps about a core's worth of CPU beside three others until that test
    ends (one thread at nice 14 weighs as much as three at 19), so the suite does not end with it
    running alone on one core. (Raising niceness needs no privilege; lowering it again would,
    hence for good.)"""
    if not os.environ.get("PYTEST_XDIST_WORKER") or item.get_closest_marker("longest"):
        return
    current = os.nice(0)
    if 0 < current < 19:
        os.nice(19 - current)


@pytest.fixture(autouse=True)
def _no_flywheel_env_leaks() -> Iterator[None]:
    """Whatever FLYWHEEL_* variables a test (or code it runs) sets, the next test does not see."""
    before = {k: v for k, v in os.environ.items() if k.startswith("FLYWHEEL_")}
    yield
    for key in [k for k in os.environ if k.startswith("FLYWHEEL_") and k not in before]:
        del os.environ[key]
    os.environ.update(before)


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[None]:
    """A real Prefect ephemeral API for the whole session. Starting one takes about 10 CPU
    seconds, but a worker's server starts at nice 19 (``pytest_runtest_setup``) beside vLLM
    starting at normal priority in the serial run, where it has waited minutes for the CPU:
    Prefect's harness counts wall seconds, so it is given the test timeout's worth of them."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=600):
        yield


@pytest.fixture
def flywheel_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty FLYWHEEL_HOME for this test, with settings re-read from the environment."""
    from infra.settings import get_settings

    home = tmp_path / "home"
    monkeypatch.setenv("FLYWHEEL_HOME", str(home))
    # the fixtures plant traces of users without consent rows; the opt-in default (PIPA) is
    # tested where a test sets FLYWHEEL_CONSENT_MODE=opt_in (tests/integration/test_consent.py)
    monkeypatch.setenv("FLYWHEEL_CONSENT_MODE", "opt_out")
    monkeypatch.chdir(tmp_path)  # no stray .env
    get_settings.cache_clear()
    yield home
    get_settings.cache_clear()


@pytest.fixture(scope="session")
def bootstrap_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache of the bootstrapped v0 for the whole run, keyed by its input hash as a
    user's is: the tests that bootstrap the same config pre-train it once and copy it after.
    Under pytest-xdist the workers share it; ``FLYWHEEL_TEST_BOOTSTRAP_CACHE`` keeps it across
    runs (a CI cache: the hash covers the config, seed, golden set and recipe version)."""
    kept = os.environ.get("FLYWHEEL_TEST_BOOTSTRAP_CACHE")
    if kept:
        path = Path(kept)
    else:
        base = tmp_path_factory.getbasetemp()
        path = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "bootstrap"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def shared_bootstrap(bootstrap_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Bootstraps in this test build into (or copy from) the session's :func:`bootstrap_cache`;
    the model is still registered in the test's own store and model cache."""
    from infra.settings import get_settings

    monkeypatch.setenv("FLYWHEEL_BOOTSTRAP_CACHE_DIR", str(bootstrap_cache))
    get_settings.cache_clear()
    return bootstrap_cache


@pytest.fixture
def settings(flywheel_home: Path):
    from infra.settings import get_settings

    return get_settings()


from tests.netguard import no_network  # noqa: E402,F401 - fixture shared by all tests
