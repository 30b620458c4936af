"""Client API keys on the public listener, from a hostile client's side: without a key, with a
made-up or revoked one, with the admin token on the wrong listener, past a rate limit, on a
workload the key was not given, and one key voting a canary down under 25 invented users. The
embedded demo's open mode keeps working, and says so."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from infra.client_keys import create_key, read_keys
from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, save_state
from infra.settings import GatewaySettings, ReleaseSettings, Settings
from infra.store import LocalStore
from tests.fakes.upstream import EchoUpstream

pytestmark = pytest.mark.integration

TOKEN = "client-keys-admin-token-0123456789abcdef"
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}
ORDER = [
    {"role": "system", "content": "You answer questions about orders."},
    {
        "role": "tool",
        "content": json.dumps({"order": "A-1042", "customer": "Dana Reyes", "total": "81.20"}),
    },
    {"role": "user", "content": "Where is order A-1042?"},
]
CANARY = RoutingState(stable="v0", candidate="v1", phase="canary", weight=100)


@contextmanager
def gateway(
    tmp_path: Path, state: RoutingState | None = None, **cfg: Any
) -> Iterator[tuple[GatewayHandle, LocalStore]]:
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(admin_token=TOKEN, diverse_fraction=0, **cfg),
        workloads=["sql", "support"],
    )
    store = LocalStore(tmp_path / "store")
    save_state(store, state or RoutingState(stable="v0"))
    upstreams = {v: EchoUpstream(v) for v in ("v0", "v1")}
    with start_background_gateway(
        settings, port=0, store=store, upstreams=upstreams, intervals=Intervals(state_s=0.1)
    ) as gw:
        yield gw, store


def chat(gw: GatewayHandle, key: str | None, **body: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
    payload = {"messages": ORDER, **body}
    return httpx.post(f"{gw.url}/v1/chat/completions", json=payload, headers=headers, timeout=60)


def test_open_mode_serves_anyone_and_names_itself(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO), gateway(tmp_path) as (gw, _store):
        assert chat(gw, None).status_code == 200
        assert chat(gw, "sk-whatever-the-sdk-sends").status_code == 200
    assert any("open mode" in r.getMessage() for r in caplog.records)


def test_keyed_mode_refuses_missing_unknown_and_revoked_keys_and_never_logs_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = LocalStore(tmp_path / "store")
    _entry, app_key = create_key(store, name="support-app")
    forged = "fw-" + "A" * 43
    with caplog.at_level(logging.DEBUG), gateway(tmp_path) as (gw, _):
        sdk = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=app_key, max_retries=0)
        answer = sdk.chat.completions.create(model="flywheel", messages=ORDER)  # type: ignore[arg-type]
        assert answer.choices[0].message.content
        for shown in (None, forged, app_key[:-1], "Basic " + app_key):
            reply = (
                httpx.post(
                    f"{gw.url}/v1/chat/completions",
                    json={"messages": ORDER},
                    headers={"Authorization": shown},
                )
                if shown and shown.startswith("Basic")
                else chat(gw, shown)
            )
            assert reply.status_code == 401, reply.text
            error = reply.json()["error"]
            assert error["code"] == "invalid_api_key" and error["type"] == "invalid_request_error"
            assert app_key[:12] not in reply.text and forged not in reply.text
        bad = openai.OpenAI(base_url=f"{gw.url}/v1", api_key=forged, max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            bad.chat.completions.create(model="flywheel", messages=ORDER)  # type: ignore[arg-type]
        # the vote and the model list need a key too
        assert (
            httpx.post(
                f"{gw.url}/v1/feedback", json={"trace_id": "0" * 32, "value": -1}
            ).status_code
            == 401
        )
        assert httpx.get(f"{gw.url}/v1/models").status_code == 401
        keys = httpx.get(f"{gw.admin_url}/admin/keys", headers=OPERATOR).json()["keys"]
        assert [k["name"] for k in keys] == ["support-app"] and "digest" not in keys[0]
        revoked = httpx.post(f"{gw.admin_url}/admin/keys/{keys[0]['id']}/revoke", headers=OPERATOR)
        assert revoked.status_code == 200 and revoked.json()["revoked_at"]
        # the last key revoked: still keyed mode, nobody is served
        assert chat(gw, app_key).status_code == 401
        assert chat(gw, None).status_code == 401
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert app_key not in logged and forged not in logged
    assert app_key not in (tmp_path / "store" / "gateway" / "keys.json").read_text()


def test_a_key_created_through_the_admin_api_is_shown_once_and_works(tmp_path: Path) -> None:
    with gateway(tmp_path) as (gw, store):
        assert chat(gw, None).status_code == 200  # open until the first key
        made = httpx.post(
            f"{gw.admin_url}/admin/keys", json={"name": "billing-bot"}, headers=OPERATOR
        )
        assert made.status_code == 201
        key = made.json()["key"]
        assert chat(gw, key).status_code == 200
        assert chat(gw, None).status_code == 401
        # the public listener has no key API, and the admin API wants its token
        assert httpx.post(f"{gw.url}/admin/keys", json={"name": "x"}).status_code == 404
        assert httpx.post(f"{gw.admin_url}/admin/keys", json={"name": "x"}).status_code == 401
    assert key not in json.dumps(read_keys(store).model_dump(mode="json"))


def test_the_admin_token_is_no_credential_on_the_public_listener(tmp_path: Path) -> None:
    """With it a public caller once pinned any version and saw route headers."""
    state = RoutingState(stable="v0", candidate="v1", phase="shadow", weight=0)
    with gateway(tmp_path, state) as (gw, _store):
        public = chat(gw, TOKEN, model="v1")  # open mode: the token is any client's string
        assert public.status_code == 404
        routed = chat(gw, TOKEN)
        assert routed.status_code == 200 and "x-flywheel-model" not in routed.headers
        operator = httpx.post(
            f"{gw.admin_url}/v1/chat/completions",
            json={"model": "v1", "messages": ORDER},
            headers=OPERATOR,
        )
        assert operator.status_code == 200 and operator.headers["x-flywheel-model"] == "v1"
        stranger = httpx.post(
            f"{gw.admin_url}/v1/chat/completions", json={"model": "v1", "messages": ORDER}
        )
        assert stranger.status_code == 401
    store = LocalStore(tmp_path / "keyed" / "store")
    create_key(store, name="app")
    with gateway(tmp_path / "keyed", state) as (gw, _store):
        assert chat(gw, TOKEN).status_code == 401


def test_rate_limit_and_workloads_of_a_key(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    _, sql_key = create_key(store, name="sql-app", workloads=["sql"], rate_per_min=3)
    with gateway(tmp_path) as (gw, _store):
        other = chat(gw, sql_key, metadata={"workload": "support"})
        assert other.status_code == 403
        assert other.json()["error"]["code"] == "workload_not_allowed"
        assert chat(gw, sql_key).status_code == 200  # no workload named: runs as sql
        assert chat(gw, sql_key, metadata={"workload": "sql"}).status_code == 200
        limited = chat(gw, sql_key)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        assert limited.json()["error"]["code"] == "rate_limit_exceeded"


def _feedback_voices(gw: GatewayHandle, model: str, value: str) -> float:
    registry = gw.app.state.parts.metrics.registry
    sample = registry.get_sample_value(
        "user_feedback_voices_total", {"model": model, "value": value, "workload": "default"}
    )
    return sample or 0.0


def test_one_key_voting_a_canary_down_under_25_users_is_five_voices(tmp_path: Path) -> None:
    """25 invented users under one key, each voting the canary down, once made 25 voices:
    enough to fail a feedback step (20 votes) and to fire the alert (10 down)."""
    store = LocalStore(tmp_path / "store")
    _, abuser = create_key(store, name="abuser")
    _, honest = create_key(store, name="storefront")
    with gateway(tmp_path, CANARY) as (gw, _store):
        for i in range(25):
            reply = chat(gw, abuser, user=f"sock-puppet-{i}")
            assert reply.status_code == 200
            vote = httpx.post(
                f"{gw.url}/v1/feedback",
                json={"trace_id": reply.headers["x-trace-id"], "value": -1},
                headers={"Authorization": f"Bearer {abuser}"},
            )
            assert vote.status_code == 202
        for i in range(3):  # the honest app's users are heard as before
            reply = chat(gw, honest, user=f"shopper-{i}")
            httpx.post(
                f"{gw.url}/v1/feedback",
                json={"trace_id": reply.headers["x-trace-id"], "value": 1},
                headers={"Authorization": f"Bearer {honest}"},
            )
        down, up = _feedback_voices(gw, "v1", "-1"), _feedback_voices(gw, "v1", "1")
        registry = gw.app.state.parts.metrics.registry
        capped = registry.get_sample_value("flywheel_voices_capped_total", {})
    assert (down, up) == (5, 3)
    assert down + up < ReleaseSettings().min_feedback  # no feedback verdict from this step
    assert down < 10  # the alert asks for 10 thumbs-down voices
    assert capped is not None and capped >= 20


def test_two_applications_with_their_own_users_are_heard_in_full(tmp_path: Path) -> None:
    """Two keys, each an application with 12 users who all vote, their traffic interleaved
    as it is in a step: every vote and every user served counts. A fixed cap of 5 voices per
    key made them 10 users a side, under the step's minimum, and a split that no longer
    matched its weight."""
    store = LocalStore(tmp_path / "store")
    keys = [create_key(store, name=name)[1] for name in ("support-bot", "storefront")]
    with gateway(tmp_path, CANARY) as (gw, _store):
        for i in range(12):  # both applications' users are answered, then they vote
            replies = [chat(gw, key, user=f"app{k}-user{i}") for k, key in enumerate(keys)]
            for k, (key, reply) in enumerate(zip(keys, replies, strict=True)):
                assert reply.status_code == 200
                vote = httpx.post(
                    f"{gw.url}/v1/feedback",
                    json={"trace_id": reply.headers["x-trace-id"], "value": 1 - 2 * k},
                    headers={"Authorization": f"Bearer {key}"},
                )
                assert vote.status_code == 202
        registry = gw.app.state.parts.metrics.registry
        served = registry.get_sample_value(
            "agent_voices_total", {"model": "v1", "route": "canary", "workload": "default"}
        )
        up, down = _feedback_voices(gw, "v1", "1"), _feedback_voices(gw, "v1", "-1")
    assert served == 24
    assert (up, down) == (12, 12)


def test_healthz_and_public_metrics_name_no_candidate_during_a_canary(tmp_path: Path) -> None:
    with gateway(
        tmp_path, RoutingState(stable="v0", candidate="v1", phase="canary", weight=30)
    ) as (
        gw,
        _store,
    ):
        for i in range(12):
            assert chat(gw, None, user=f"u{i}").status_code == 200
        health = httpx.get(f"{gw.url}/healthz").json()
        metrics = httpx.get(f"{gw.url}/metrics").text
        full = httpx.get(f"{gw.admin_url}/admin/metrics", headers=OPERATOR).text
    assert health == {"status": "ok", "stable": "v0"}
    assert '"v1"' not in metrics and "route=" not in metrics
    # no weight: the family is absent (a value of 30.0 may be any counter of the process's,
    # the retries of other tests in this worker included)
    assert "flywheel_route_weight" not in metrics
    assert 'flywheel_route_weight{model="v1"} 30.0' in full
