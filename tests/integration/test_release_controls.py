"""A typo cannot take traffic down (issue 13): with the gateway serving users and every
control going through its admin API, ``flywheel release v99`` changes nothing, ``flywheel
promote`` refuses a candidate the golden gate held for review (``--force --reason`` promotes
it, audited), and ``flywheel rollback`` returns to a servable stable version when the stable
one cannot be served. Users get answers throughout."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from deployments import cli
from infra.catalog import open_catalog, scan
from infra.errors import ReleaseError, UnservableVersion
from infra.gateway import GatewayHandle
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, load_state, save_state
from infra.settings import Settings, get_settings
from infra.store import open_store
from tests.fakes.upstream import start_fake_upstream
from tests.integration.test_release_flow import ACCURACY, answerer

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock

TOKEN = "test-admin-token-of-some-length-0123456789"


@pytest.fixture
def env(flywheel_home, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    """Fake model servers for v0-v3 (configured upstreams) and stable v0."""
    handles = {v: start_fake_upstream(v, answer=answerer(a)) for v, a in ACCURACY.items()}
    urls = {v: h.url for v, h in handles.items()}
    monkeypatch.setenv("FLYWHEEL_GATEWAY__UPSTREAMS", json.dumps(urls))
    monkeypatch.setenv("FLYWHEEL_GATEWAY__DIVERSE_FRACTION", "0")
    monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_TOKEN", TOKEN)
    get_settings.cache_clear()
    settings = get_settings()
    save_state(open_store(settings), RoutingState(stable="v0"))
    yield settings
    for handle in handles.values():
        handle.stop()


@pytest.fixture
def gateway(env: Settings, monkeypatch: pytest.MonkeyPatch) -> Iterator[GatewayHandle]:
    """The gateway serving users; the CLI and the flows change routing through its admin API."""
    from infra.gateway.serve import start_background_gateway

    with start_background_gateway(env, port=0, intervals=Intervals(state_s=0.1)) as gw:
        monkeypatch.setenv("FLYWHEEL_GATEWAY__URL", gw.url)
        monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_URL", gw.admin_url or "")
        get_settings.cache_clear()
        yield gw
        for thread in gw.app.state.admin.threads:
            thread.join(10)


def chats(gw: GatewayHandle, n: int = 6) -> set[tuple[int, str | None]]:
    """(status, answering version) of ``n`` requests on the routed model (with the admin
    token: only its answers name the version)."""
    seen = set()
    operator = {"Authorization": f"Bearer {TOKEN}"}
    for i in range(n):
        body = {"model": "flywheel", "messages": [{"role": "user", "content": f"{i} + 1 = ?"}]}
        url = f"{gw.admin_url}/v1/chat/completions"  # the operator's listener
        resp = httpx.post(url, json=body, headers=operator, timeout=30)
        seen.add((resp.status_code, resp.headers.get("x-flywheel-model")))
    return seen


def audit(settings: Settings, event_type: str) -> list[dict[str, Any]]:
    rows = [r for r in scan(open_catalog(settings), "audit_log").to_pylist()]
    return sorted((r for r in rows if r["event_type"] == event_type), key=lambda r: r["at"])


def test_release_of_a_missing_version_leaves_routing_and_traffic_alone(
    prefect_api, env: Settings, gateway: GatewayHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.release import release

    store = open_store(env)
    before = load_state(store)
    assert cli.main(["release", "v99"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "flywheel release: error: model version v99 does not exist; versions: v0, v1, v2, v3"
    ]
    with pytest.raises(UnservableVersion):  # a run started from the UI or a deployment
        release("v99")
    assert load_state(store) == before  # same revision: nothing was written
    assert cli.main(["promote"]) == 2  # nothing half-released to promote by mistake
    assert "no release of a candidate to promote" in capsys.readouterr().err
    assert chats(gateway) == {(200, "v0")}
    assert httpx.get(f"{gateway.url}/healthz").json()["stable"] == "v0"

    # what `release v99` used to leave behind: neither promote nor resume routes users to it
    leftover = RoutingState(stable="v0", candidate="v99", phase="held")
    save_state(store, leftover, force=True)
    gateway.app.state.gateway.watcher.refresh()
    left = load_state(store)
    assert cli.main(["promote", "--force", "--reason", "typo"]) == 2
    assert "v99 cannot be served" in capsys.readouterr().err
    assert cli.main(["resume"]) == 2
    assert "model version v99 does not exist" in capsys.readouterr().err
    assert load_state(store) == left
    assert chats(gateway) == {(200, "v0")}


def test_promote_refuses_a_candidate_the_gate_held_until_forced_with_a_reason(
    prefect_api, env: Settings, gateway: GatewayHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    from flows.release import ReleaseOptions, release
    from flows.release_control import release_control

    out = release("v3", ReleaseOptions(max_golden_items=60))  # answers exactly as v0 does
    assert (out.outcome, out.gate and out.gate["decision"]) == ("held", "MANUAL_REVIEW")
    store = open_store(env)
    held = load_state(store)
    assert cli.main(["promote"]) == 2
    assert "v3 has not passed the golden gate" in capsys.readouterr().err
    with pytest.raises(ReleaseError, match="has not passed the golden gate"):
        release_control("promote", reason="looks fine", actor="person")
    assert cli.main(["promote", "--force"]) == 2
    assert "--force needs --reason" in capsys.readouterr().err
    assert load_state(store) == held
    assert chats(gateway) == {(200, "v0")}

    why = "gate report read: same answers, smaller model"
    assert cli.main(["promote", "--force", "--reason", why, "--actor", "alice"]) == 0
    state = load_state(store)
    assert (state.stable, state.candidate, state.phase) == ("v3", None, "promoted")
    assert chats(gateway) == {(200, "v3")}  # in effect at once
    event = audit(env, "release_transition")[-1]
    details = json.loads(event["details"])
    assert (event["actor"], event["subject"], details["to_phase"]) == ("alice", "v3", "promoted")
    assert details["reason"] == why
    assert details["evidence"]["forced"] is True
    assert details["evidence"]["gate"] == "MANUAL_REVIEW"


def test_rollback_returns_to_a_servable_stable_version(
    prefect_api, env: Settings, gateway: GatewayHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(env)
    broken = RoutingState(stable="v99", phase="promoted")  # what `promote` used to allow
    save_state(store, broken, force=True)
    gateway.app.state.gateway.watcher.refresh()
    assert {status for status, _ in chats(gateway, 2)} == {502}  # every user fails

    assert cli.main(["rollback", "--reason", "every request fails", "--actor", "oncall"]) == 0
    captured = capsys.readouterr()
    assert "the stable version v99 cannot be served; v0 is the stable version again" in (
        captured.err
    )
    state = load_state(store)
    assert (state.stable, state.phase) == ("v0", "rolled_back")
    assert chats(gateway) == {(200, "v0")}
    flow_event = json.loads(audit(env, "rollback_flow")[-1]["details"])
    assert (flow_event["restored_stable"], flow_event["unservable_stable"]) == ("v0", "v99")
    assert cli.main(["rollback"]) == 0  # idempotent: nothing to roll back, nothing restored
    assert load_state(store).revision == state.revision


def test_rollback_after_a_promotion_returns_to_the_previous_stable_while_it_bakes(
    prefect_api, env: Settings, gateway: GatewayHandle, capsys: pytest.CaptureFixture[str]
) -> None:
    from infra.routing import GatewayRouting
    from infra.settings import ReleaseSettings
    from tasks.release.machine import transitions

    routing = GatewayRouting(str(gateway.admin_url), TOKEN)
    transitions.begin_release(routing, None, "v2", actor="flow")
    policy = ReleaseSettings(canary_steps=(100,))
    transitions.canary_move(routing, None, "v2", step=0, policy=policy, actor="flow").or_raise()
    transitions.promotion(routing, None, "v2", actor="flow", reason="passed").or_raise()
    assert chats(gateway) == {(200, "v2")}
    assert cli.main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rollback_to"] == "v0"

    assert cli.main(["rollback", "--reason", "answers got worse", "--actor", "oncall"]) == 0
    out = capsys.readouterr().out
    assert "version" in out and "v2" in out
    state = load_state(open_store(env))
    assert (state.stable, state.phase, state.rejected) == ("v0", "rolled_back", ["v2"])
    assert chats(gateway) == {(200, "v0")}
    for thread in gateway.app.state.admin.threads:  # the gateway audits in the background
        thread.join(10)
    event = audit(env, "rollback")[-1]
    assert (event["actor"], event["subject"]) == ("oncall", "v2")
    assert json.loads(event["details"])["stable_before"] == "v2"
    assert cli.main(["rollback"]) == 0  # once: the promotion is undone, nothing more to do
    assert load_state(open_store(env)).revision == state.revision
