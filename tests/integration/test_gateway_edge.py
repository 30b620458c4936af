"""The gateway's edge as a client meets it on loopback: oversized requests refused before
anything is traced, trace text capped, one vote per trace and only on traces the gateway
served, rolled-back versions not served by name, the admin API and its schema off the public
listener, an honest /healthz, weak admin tokens refused, and `flywheel gateway` saying where
it listens."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import SecretStr

from infra.errors import ConfigError
from infra.gateway import GatewayHandle, start_background_gateway
from infra.gateway.parts import Intervals
from infra.routing import RoutingState, save_state
from infra.settings import GatewaySettings, Settings
from infra.store import LocalStore
from infra.traces import SpoolSource
from tests.fakes.upstream import FakeUpstreamHandle, start_fake_upstream
from tests.procs import free_port

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "edge-admin-token-0123456789abcdef0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MESSAGES = [{"role": "user", "content": "What is 53 * 47?"}]


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstreamHandle]]:
    handles = {v: start_fake_upstream(v, keep_bodies=True) for v in ("v0", "v1")}
    yield handles
    for handle in handles.values():
        handle.stop()


def start(
    tmp_path: Path,
    upstreams: dict[str, FakeUpstreamHandle],
    state: RoutingState | None = None,
    **gw: Any,
) -> GatewayHandle:
    store = LocalStore(tmp_path / "store")
    if state is not None:
        save_state(store, state)
    settings = Settings(
        home=tmp_path,
        gateway=GatewaySettings(
            upstreams={v: h.url for v, h in upstreams.items()},
            admin_token=SecretStr(TOKEN),
            **{"diverse_fraction": 0.0, **gw},
        ),
    )
    return start_background_gateway(
        settings, port=0, store=store, intervals=Intervals(state_s=0.1, flush_s=0.1)
    )


def spool_lines(tmp_path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted((tmp_path / "store" / "traces").rglob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def settle(gw: GatewayHandle, tmp_path: Path) -> list[dict[str, Any]]:
    """Everything the gateway traced, once its dispatcher has flushed (the gateway stopped)."""
    gw.stop()
    return spool_lines(tmp_path)


def metric(source: GatewayHandle | str, name: str, **labels: str) -> float:
    """A sample of the gateway's every series (``source`` a gateway: what its admin listener's
    ``/admin/metrics`` shows), or of the public ``/metrics`` at ``source``, a URL."""
    if isinstance(source, str):
        text = httpx.get(f"{source}/metrics").text
    else:
        text = source.app.state.parts.metrics.render().decode()
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series == (f"{name}{{{want}}}" if labels else name):
            return float(value)
    return 0.0


# ------------------------------------------------------------------------ a client leaves


def test_a_client_that_leaves_mid_stream_stops_the_relay(tmp_path: Path, upstreams) -> None:
    """The real server (uvicorn) tells the relay the client has gone: the model's stream is
    closed at the next event, not read to its end, and the trace records the failed answer."""
    upstreams["v0"].app.chunk_delay_s = 0.5  # the answer's 6 events take 3 s or more
    body = {"model": "flywheel", "messages": MESSAGES, "stream": True}
    with start(tmp_path, upstreams) as gw:
        with httpx.stream("POST", f"{gw.url}/v1/chat/completions", json=body, timeout=10) as r:
            first = next(line for line in r.iter_lines() if line.startswith("data:"))
        # the response was closed unread: the connection is closed too
        time.sleep(2.0)  # long enough for the relay to see it, shorter than the answer
        [trace] = [t for t in settle(gw, tmp_path) if t["type"] == "trace"]
    assert "chat.completion.chunk" in first
    assert trace["error_count"] == 1 and trace["answer"] == ""
    assert trace["latency_s"] < 2.5, trace["latency_s"]  # stopped early, not after 3 s


# ------------------------------------------------------------------------ request size


def test_a_50_mb_request_is_413_and_nothing_is_written(tmp_path: Path, upstreams) -> None:
    with start(tmp_path, upstreams) as gw:
        huge = {"messages": [{"role": "user", "content": "x" * 50_000_000}]}
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json=huge, timeout=60)
        assert resp.status_code == 413
        assert resp.json()["error"]["code"] == "request_too_large"
        assert "FLYWHEEL_GATEWAY__MAX_BODY_BYTES" in resp.json()["error"]["message"]
        # a chunked body (no Content-Length) is cut while it is read
        chunks = (b"x" * 1_000_000 for _ in range(10))
        chunked = httpx.post(
            f"{gw.url}/v1/chat/completions",
            content=chunks,
            headers={"Content-Type": "application/json"},
            timeout=60,
        )
        assert chunked.status_code == 413
        # a chunked body under the limit is answered as usual
        small = (part for part in (json.dumps({"messages": MESSAGES}).encode(),))
        ok = httpx.post(f"{gw.url}/v1/chat/completions", content=small, timeout=30)
        assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"]
        calls = upstreams["v0"].app.calls
    traces = [t for t in settle(gw, tmp_path) if t["type"] == "trace"]
    assert calls == 1 and len(traces) == 1  # only the small request reached upstream and spool
    assert "x" * 1000 not in json.dumps(traces)


def test_trace_text_is_capped_and_the_cut_counted(tmp_path: Path, upstreams) -> None:
    question = "why? " * 1000  # 5000 characters, well under the body limit
    with start(tmp_path, upstreams, max_trace_chars=300) as gw:
        system = {"role": "system", "content": "c" * 400}
        body = {"messages": [system, {"role": "user", "content": question}]}
        resp = httpx.post(f"{gw.url}/v1/chat/completions", json=body)
        assert resp.status_code == 200
        assert resp.json()["choices"][0]["message"]["content"] == f"echo: {question}"  # user: all
        small = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES})
        assert small.status_code == 200
        assert metric(gw, "flywheel_trace_truncated_total") == 1
    traces = {t["trace_id"]: t for t in settle(gw, tmp_path) if t["type"] == "trace"}
    cut = traces[resp.headers["x-trace-id"]]
    assert cut["question"] == question[:300] and len(cut["answer"]) == 300
    assert cut["contexts"] == ["c" * 300]
    assert traces[small.headers["x-trace-id"]]["question"] == MESSAGES[0]["content"]


# ---------------------------------------------------------------------------- feedback


def test_25_feedbacks_on_one_trace_count_once_and_the_last_vote_wins(
    tmp_path: Path, upstreams
) -> None:
    with start(tmp_path, upstreams) as gw:
        trace_id = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES}).headers[
            "x-trace-id"
        ]
        for _ in range(25):
            resp = httpx.post(f"{gw.url}/v1/feedback", json={"trace_id": trace_id, "value": -1})
            assert resp.status_code == 202
        assert metric(gw, "user_feedback_total", model="v0", value="-1", workload="default") == 1
        changed = httpx.post(f"{gw.url}/v1/feedback", json={"trace_id": trace_id, "value": 1})
        assert changed.status_code == 202 and changed.json()["counted"] is False
        assert metric(gw, "user_feedback_total", model="v0", value="-1", workload="default") == 1
        assert metric(gw, "user_feedback_total", model="v0", value="1", workload="default") == 0
        assert metric(gw, "flywheel_feedback_changed_total", model="v0") == 1
    lines = settle(gw, tmp_path)
    assert len([x for x in lines if x["type"] == "feedback"]) <= 2  # repeats are not written
    now = datetime.now(UTC)
    batch = SpoolSource(LocalStore(tmp_path / "store"), max_record_bytes=1_000_000).read_window(
        now - timedelta(hours=1), now + timedelta(hours=1)
    )
    [record] = batch.records
    assert (record.trace_id, record.feedback) == (trace_id, 1)  # what training reads


def test_feedback_on_a_trace_the_gateway_never_served_is_refused(tmp_path: Path, upstreams) -> None:
    with start(tmp_path, upstreams) as gw:
        real = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES})
        trace_id = real.headers["x-trace-id"]
        assert real.json()["id"] == f"chatcmpl-{trace_id}"
        forged = trace_id[:-1] + ("0" if trace_id[-1] != "0" else "1")
        for fake in (uuid.uuid4().hex, forged, "not-a-trace"):
            resp = httpx.post(f"{gw.url}/v1/feedback", json={"trace_id": fake, "value": -1})
            assert resp.status_code == 404 and resp.json()["error"]["code"] == "trace_not_found"
        assert (
            metric(gw, "user_feedback_total", model="unknown", value="-1", workload="default") == 0
        )
        assert metric(gw, "user_feedback_total", model="v0", value="-1", workload="default") == 0
        assert metric(gw, "flywheel_feedback_refused_total") == 3
    assert not [x for x in settle(gw, tmp_path) if x["type"] == "feedback"]


def test_a_trace_id_stays_valid_after_a_restart(tmp_path: Path, upstreams) -> None:
    with start(tmp_path, upstreams) as gw:
        trace_id = httpx.post(f"{gw.url}/v1/chat/completions", json={"messages": MESSAGES}).headers[
            "x-trace-id"
        ]
    with start(tmp_path, upstreams) as again:  # same salt: the signature still verifies
        resp = httpx.post(f"{again.url}/v1/feedback", json={"trace_id": trace_id, "value": 1})
        assert resp.status_code == 202


# ------------------------------------------------------------------- rejected versions


def test_a_rejected_version_named_by_a_client_is_404(tmp_path: Path, upstreams) -> None:
    state = RoutingState(rejected=["v1"])
    with start(tmp_path, upstreams, state) as gw:
        client = openai.OpenAI(base_url=f"{gw.url}/v1", api_key="unused", max_retries=0)
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            client.chat.completions.create(model="v1", messages=MESSAGES)
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(
                model="v1", messages=MESSAGES, extra_headers={"Authorization": "Bearer wrong"}
            )
        assert {m.id for m in client.models.list()} == {"flywheel", "v0"}
        # the admin token on the public listener is a client like any other
        with pytest.raises(openai.NotFoundError):
            client.chat.completions.create(
                model="v1", messages=MESSAGES, extra_headers={"Authorization": f"Bearer {TOKEN}"}
            )
        operator = openai.OpenAI(base_url=f"{gw.admin_url}/v1", api_key=TOKEN, max_retries=0)
        admin = operator.chat.completions.create(model="v1", messages=MESSAGES)
        assert admin.model == "v1"
        assert client.chat.completions.create(model="v0", messages=MESSAGES).model == "v0"
    assert upstreams["v1"].app.calls == 1  # only the admin's request reached v1


# ------------------------------------------------------------------ the two listeners


def test_admin_api_and_schema_are_off_the_public_listener(tmp_path: Path, upstreams) -> None:
    with start(tmp_path, upstreams) as gw:
        assert gw.admin_url is not None and gw.admin_url != gw.url
        for path in ("/openapi.json", "/docs", "/redoc", "/admin/openapi.json"):
            assert httpx.get(f"{gw.url}{path}").status_code == 404, path
        public = httpx.get(f"{gw.url}/admin/state", headers=AUTH)
        assert public.status_code == 404 and "FLYWHEEL_GATEWAY__ADMIN_PORT" in public.text
        rollback = httpx.post(f"{gw.url}/admin/rollback", json={}, headers=AUTH)
        assert rollback.status_code == 404
        assert httpx.get(f"{gw.admin_url}/admin/state", headers=AUTH).json()["stable"] == "v0"
        schema = httpx.get(f"{gw.admin_url}/admin/openapi.json").json()
        assert "/admin/alerts" in schema["paths"] and "/v1/chat/completions" not in schema["paths"]
        chat = httpx.post(f"{gw.admin_url}/v1/chat/completions", json={"messages": MESSAGES})
        assert chat.status_code == 401  # the admin listener's chat is the operator's alone


@pytest.mark.parametrize(
    "token", ["change-me", "CHANGEME-please-0123456789abcdefghij", "short-but-random-Q7x", "a" * 40]
)
def test_a_placeholder_or_short_admin_token_refuses_to_start(tmp_path: Path, token: str) -> None:
    settings = Settings(home=tmp_path, gateway=GatewaySettings(admin_token=SecretStr(token)))
    with pytest.raises(ConfigError, match="FLYWHEEL_GATEWAY__ADMIN_TOKEN"):
        start_background_gateway(settings, port=0, store=LocalStore(tmp_path / "store"))


# ----------------------------------------------------------------------------- health


def test_healthz_is_503_while_the_stable_version_cannot_be_served(
    tmp_path: Path, upstreams
) -> None:
    with start(tmp_path, upstreams) as gw:
        ok = httpx.get(f"{gw.url}/healthz")
        assert ok.status_code == 200 and ok.json()["status"] == "ok"
        upstreams["v0"].stop()
        time.sleep(2.1)  # past the health check's cache
        down = httpx.get(f"{gw.url}/healthz")
        assert down.status_code == 503 and down.json()["status"] == "unhealthy"
        assert "v0" in down.json()["reason"] and "unreachable" in down.json()["reason"]
        assert down.json()["stable"] == "v0"
        assert httpx.get(f"{gw.url}/livez").status_code == 200  # the process itself is up


def test_healthz_is_503_when_the_stable_model_is_nowhere(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, gateway=GatewaySettings(diverse_fraction=0.0))
    with start_background_gateway(settings, port=0, store=LocalStore(tmp_path / "store")) as gw:
        resp = httpx.get(f"{gw.url}/healthz")
    assert resp.status_code == 503
    assert "v0 is not in the store" in resp.json()["reason"]
    assert "flywheel bootstrap" in resp.json()["reason"]


# ------------------------------------------------------------------- flywheel gateway


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYWHEEL_")}
    env.update(PYTHONPATH=str(ROOT), FLYWHEEL_HOME=str(tmp_path / "home"), **extra)
    return env


def test_flywheel_gateway_prints_where_it_listens(tmp_path: Path) -> None:
    port, admin_port = free_port(), free_port()
    env = cli_env(
        tmp_path,
        FLYWHEEL_GATEWAY__PORT=str(port),
        FLYWHEEL_GATEWAY__ADMIN_PORT=str(admin_port),
        FLYWHEEL_GATEWAY__ADMIN_TOKEN=TOKEN,
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "deployments.cli", "gateway"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # blocks until the gateway says it listens (or exits)
        assert f"gateway listening on http://127.0.0.1:{port}" in line, line
        assert f"admin API on http://127.0.0.1:{admin_port}" in line, line
        assert httpx.get(f"http://127.0.0.1:{port}/livez", timeout=5).status_code == 200
        admin = httpx.get(f"http://127.0.0.1:{admin_port}/admin/state", headers=AUTH, timeout=5)
        assert admin.status_code == 200
    finally:
        proc.terminate()
        proc.wait(30)


def test_flywheel_gateway_with_the_compose_placeholder_token_is_one_line(tmp_path: Path) -> None:
    env = cli_env(tmp_path, FLYWHEEL_GATEWAY__ADMIN_TOKEN="change-me")
    out = subprocess.run(
        [sys.executable, "-m", "deployments.cli", "gateway"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert out.returncode != 0
    lines = (out.stdout + out.stderr).strip().splitlines()
    assert len(lines) == 1 and "FLYWHEEL_GATEWAY__ADMIN_TOKEN" in lines[0], lines
    assert "Traceback" not in out.stderr
