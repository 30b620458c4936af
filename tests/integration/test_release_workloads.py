"""One workload's release end to end through the gateway's admin API (fake model servers): the
release flow, ``flywheel promote --workload`` and ``flywheel rollback --workload`` move that
workload's routing alone; the shared release and every other workload's users are answered
as before, and the audit trail names the workload."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from deployments import cli
from infra.catalog import open_catalog, scan
from infra.gateway import GatewayHandle
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, load_state, save_state
from infra.settings import Settings, get_settings
from infra.store import open_store
from infra.traces.conversation import WORKLOAD_HEADER
from tests.fakes.upstream import start_fake_upstream
from tests.integration.test_release_flow import ACCURACY, answerer

pytestmark = pytest.mark.integration

TOKEN = "test-admin-token-of-some-length-0123456789"


@pytest.fixture
def gateway(flywheel_home, monkeypatch: pytest.MonkeyPatch) -> Iterator[GatewayHandle]:
    """Fake model servers for v0-v3, stable v0, and the gateway every control goes through."""
    from infra.gateway.serve import start_background_gateway

    handles = {v: start_fake_upstream(v, answer=answerer(a)) for v, a in ACCURACY.items()}
    monkeypatch.setenv(
        "FLYWHEEL_GATEWAY__UPSTREAMS", json.dumps({v: h.url for v, h in handles.items()})
    )
    monkeypatch.setenv("FLYWHEEL_GATEWAY__DIVERSE_FRACTION", "0")
    monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["sql"]')
    monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_TOKEN", TOKEN)
    get_settings.cache_clear()
    save_state(open_store(get_settings()), RoutingState(stable="v0"))
    with start_background_gateway(get_settings(), port=0, intervals=Intervals(state_s=0.1)) as gw:
        monkeypatch.setenv("FLYWHEEL_GATEWAY__URL", gw.url)
        monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_URL", gw.admin_url or "")
        get_settings.cache_clear()
        yield gw
        for thread in gw.app.state.admin.threads:
            thread.join(10)
    for handle in handles.values():
        handle.stop()


def answered_by(gw: GatewayHandle, workload: str | None) -> set[str | None]:
    """The versions that answered a few users of ``workload`` (None: no workload named),
    asked with the admin token (only its answers name the version)."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    headers |= {WORKLOAD_HEADER: workload} if workload else {}
    seen = set()
    for i in range(4):
        body = {"messages": [{"role": "user", "content": f"{i} + 1 = ?"}], "user": f"u{i}"}
        url = f"{gw.admin_url}/v1/chat/completions"  # the operator's listener
        resp = httpx.post(url, json=body, headers=headers, timeout=30)
        assert resp.status_code == 200, resp.text
        seen.add(resp.headers.get("x-flywheel-model"))
    return seen


@pytest.mark.slow  # a golden gate of 60 items, three flow runs
def test_a_workload_is_released_promoted_and_rolled_back_on_its_own(
    prefect_api, gateway: GatewayHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.release import ReleaseOptions, release

    settings: Settings = get_settings()
    store = open_store(settings)
    out = release("v3", ReleaseOptions(max_golden_items=60, workload="sql"))
    assert (out.outcome, out.workload) == ("held", "sql")  # the gate asks for a person
    state = load_state(store)
    assert (state.stable, state.candidate, state.phase, state.history) == ("v0", None, "idle", [])
    assert state.for_workload("sql").phase == "held"

    assert cli.main(["promote", "--workload", "sql", "--force", "--reason", "read it"]) == 0
    assert "sql" in capsys.readouterr().out
    assert answered_by(gateway, "sql") == {"v3"}
    assert answered_by(gateway, "chat") == answered_by(gateway, None) == {"v0"}
    assert cli.main(["status", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["workloads"]
    assert [(r["workload"], r["stable"], r["phase"]) for r in rows] == [
        (None, "v0", "idle"),
        ("sql", "v3", "promoted"),
    ]

    assert (
        cli.main(["rollback", "--workload", "sql", "--reason", "worse", "--actor", "oncall"]) == 0
    )
    assert answered_by(gateway, "sql") == {"v0"}
    state = load_state(store)
    assert state.workloads["sql"].rejected == ["v3"] and state.rejected == []
    for thread in gateway.app.state.admin.threads:  # the gateway audits in the background
        thread.join(10)
    rows = scan(open_catalog(settings), "audit_log").to_pylist()
    rollback = [r for r in rows if r["event_type"] == "rollback"][-1]
    assert (rollback["subject"], json.loads(rollback["details"])["workload"]) == ("v3", "sql")
    flow_event = [r for r in rows if r["event_type"] == "rollback_flow"][-1]
    assert json.loads(flow_event["details"])["workload"] == "sql"
