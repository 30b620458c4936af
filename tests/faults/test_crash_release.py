"""SIGKILL the release flow at each of its steps (the routing state write that starts the
gate, enters shadow, each canary step, the promotion; an audit commit), then run it again:
the routing state on disk is always a legal one, no traffic ever reaches a candidate whose
gate did not pass in this release, and the rerun resumes or rolls back to a concluded, legal
state with no decisive transition audited twice. A gateway serves users from the same home
throughout (it follows ``deploy/state.json``), and its /metrics feed the canary analysis."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.gateway.parts import Intervals
from tests.faults.stages import ROOT, copy_home, stage_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]
KILLED = -9
TOKEN = "test-admin-token-of-some-length-0123456789"
CONCLUDED = {"promoted", "rolled_back", "held"}
DECISIVE = {"promoted", "rolled_back"}


@pytest.fixture(scope="module")
def api_url(prefect_api: None) -> Iterator[str]:
    """The session's Prefect API, handed to every release process."""
    from prefect.settings import PREFECT_API_URL

    yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="module")
def upstreams() -> Iterator[str]:
    """Fake model servers: v1 answers the demo domain far better than v0 (its gate passes)."""
    from tests.fakes.upstream import start_fake_upstream
    from tests.integration.test_release_flow import answerer

    handles = {
        v: start_fake_upstream(v, answer=answerer(a)) for v, a in (("v0", 0.5), ("v1", 0.95))
    }
    yield json.dumps({v: h.url for v, h in handles.items()})
    for handle in handles.values():
        handle.stop()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with stable v0 and no release yet (its audit table created up front)."""
    from infra.catalog import get_table, open_catalog
    from infra.routing import RoutingState, save_state
    from infra.settings import Settings
    from infra.store import LocalStore

    home = tmp_path_factory.mktemp("release") / "home"
    settings = Settings(home=home)
    save_state(LocalStore(settings.resolved_store_url), RoutingState(stable="v0"))
    get_table(open_catalog(settings), "audit_log")
    return home


class Served:
    """The gateway serving users from ``home`` while a release runs in another process."""

    def __init__(self, home: Path, upstreams: str) -> None:
        self.home, self.upstreams = home, upstreams
        self.stop = threading.Event()

    def __enter__(self) -> Served:
        from infra.gateway.serve import start_background_gateway
        from infra.settings import Settings
        from tests.integration.test_release_flow import Traffic

        with pytest.MonkeyPatch.context() as mp:
            for key, value in self.env().items():
                mp.setenv(key, value)
            mp.setenv("FLYWHEEL_GATEWAY__ADMIN_TOKEN", TOKEN)
            settings = Settings(home=self.home)
        self.gw = start_background_gateway(
            settings, port=0, intervals=Intervals(state_s=0.1, flush_s=0.2)
        ).__enter__()
        self.traffic = Traffic(self.gw.url)
        self.thread = threading.Thread(target=self.traffic.run, daemon=True)
        self.thread.start()
        return self

    def env(self) -> dict[str, str]:
        """What the gateway and the release process share beyond the home (not the admin
        listener's URL: the release would route through it, and its own writes of the routing
        state are the crash points; it reads the canary there, given as its option)."""
        return {
            "FLYWHEEL_GATEWAY__UPSTREAMS": self.upstreams,
            "FLYWHEEL_GATEWAY__DIVERSE_FRACTION": "0",
            # canary metrics are read on the admin listener, with the token
            "FLYWHEEL_GATEWAY__ADMIN_TOKEN": TOKEN,
            # the state machine under SIGKILL is what is tested here; the PII-leak check
            # (tests/integration/test_release_pii_leak.py) would load the anonymiser in each
            # of the eleven release processes (seconds of CPU each, beside the other workers)
            "FLYWHEEL_RELEASE__PII_LEAK_CHECK": "false",
        }

    def release(self, api_url: str, **env: str) -> subprocess.CompletedProcess[str]:
        """The release of v1 in its own process (``returncode == -9``: a crash point fired)."""
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "tests.faults.release_run",
                "v1",
                self.gw.url,
                self.gw.admin_url,
            ],
            cwd=ROOT,
            env=stage_env(self.home, api_url, **self.env(), **env),
            capture_output=True,
            text=True,
            timeout=300,
        )

    def __exit__(self, *exc: object) -> None:
        self.traffic.stop.set()
        self.thread.join(10)
        self.gw.__exit__(None, None, None)


def state(home: Path) -> Any:
    """The routing state on disk."""
    from infra.routing import load_state
    from infra.settings import Settings
    from infra.store import LocalStore

    return load_state(LocalStore(Settings(home=home).resolved_store_url))


def transitions(home: Path) -> list[dict[str, Any]]:
    """The audited release transitions, in order."""
    from infra.catalog import open_catalog, scan
    from infra.settings import Settings

    rows = scan(open_catalog(Settings(home=home)), "audit_log").to_pylist()
    rows = sorted(
        (r for r in rows if r["event_type"] == "release_transition"), key=lambda r: r["at"]
    )
    return [json.loads(r["details"]) for r in rows]


def assert_legal(s: Any) -> None:
    """A phase with the fields it implies; traffic on the candidate only after its gate passed
    in this release (the history since the release's start shows the gate's pass)."""
    assert s.phase in {"idle", "gating", "shadow", "canary", "held", "promoted", "rolled_back"}
    if s.phase in ("idle", "promoted", "rolled_back"):
        assert (s.candidate, s.weight, s.shadow_fraction) == (None, 0.0, 0.0), s
    else:
        assert s.candidate not in (None, s.stable), s
    if s.phase in ("gating", "held"):
        assert (s.weight, s.shadow_fraction) == (0.0, 0.0), s
    if s.weight > 0 or s.shadow_fraction > 0:
        assert s.phase in ("shadow", "canary") and s.candidate not in s.rejected, s
        starts = [i for i, t in enumerate(s.history) if t.to_phase == "gating"]
        since = s.history[starts[-1] :] if starts else []
        assert any(
            t.from_phase == "gating" and t.to_phase in ("shadow", "canary") for t in since
        ), s.history


@pytest.fixture(scope="module")
def clean(template: Path, upstreams: str, api_url: str, tmp_path_factory: pytest.TempPathFactory):
    """One release without faults, through every step to promoted."""
    home = copy_home(template, tmp_path_factory.mktemp("clean-release") / "home")
    with Served(home, upstreams) as served:
        done = served.release(api_url)
    assert done.returncode == 0, done.stderr
    final = state(home)
    assert (final.phase, final.stable) == ("promoted", "v1"), done.stdout
    steps = [t["to_phase"] for t in transitions(home)]
    assert steps == ["gating", "shadow", "canary", "promoted"]
    return {"state": final, "steps": steps}


POINTS = {
    "gating": "store.put:deploy/state.json#1",
    "shadow": "store.put:deploy/state.json#2",
    "canary": "store.put:deploy/state.json#3",
    "promotion": "store.put:deploy/state.json#4",
    "gate-audit": "catalog.commit:audit_log#2",
}


@pytest.mark.parametrize("point", list(POINTS.values()), ids=list(POINTS))
def test_release_killed_at_a_step_then_rerun_concludes_in_a_legal_state(
    point: str, template: Path, upstreams: str, clean: dict[str, Any], api_url: str, tmp_path: Path
) -> None:
    home = copy_home(template, tmp_path / "home")
    with Served(home, upstreams) as served:
        killed = served.release(api_url, FLYWHEEL_TEST_KILL_AT=point)
        assert killed.returncode == KILLED, killed.stderr
        assert_legal(state(home))

        rerun = served.release(api_url)
        assert rerun.returncode == 0, rerun.stderr
        final = state(home)
    print(point, "->", rerun.stdout.strip().splitlines()[-1:])  # resumed or rolled back
    assert_legal(final)
    assert final.phase in CONCLUDED, rerun.stdout
    if final.phase == "promoted":
        assert final.stable == "v1"
    else:
        assert final.stable == "v0" and final.weight == 0.0
    decisive = [t["to_phase"] for t in transitions(home) if t["to_phase"] in DECISIVE]
    assert len(decisive) <= 1, decisive  # no decision audited twice
    assert set(served.traffic.statuses) == {200}  # users got answers throughout
