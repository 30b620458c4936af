"""Shared fixtures: one session-scoped Prefect ephemeral API, and an isolated FLYWHEEL_HOME
per test (settings cache cleared so every adapter sees the test's environment)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
for _var in [
    v for v in os.environ if v.startswith("FLYWHEEL_") and not v.startswith("FLYWHEEL_TEST_")
]:
    del os.environ[_var]  # a developer's .env or shell must not leak into tests


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
    """A real Prefect ephemeral API for the whole session (starting one takes ~30 s here)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
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


@pytest.fixture
def settings(flywheel_home: Path):
    from infra.settings import get_settings

    return get_settings()


from tests.netguard import no_network  # noqa: E402,F401 - fixture shared by all tests
