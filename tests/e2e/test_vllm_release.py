"""End to end with a real vLLM server (CPU build, ``.venv-vllm``) on loopback, shared by the
module: the Llama profile is bootstrapped as ``v0`` and served by vLLM (``--max-loras`` sized
from the configuration's two workloads); ``flywheel run --server vllm`` trains a LoRA candidate
from the simulated users' traces and releases it through gate -> shadow -> canary with traffic
through the gateway to vLLM (loaded before the gate, unloaded when it is not promoted) to
promotion; then two workloads each put a candidate in canary on the same vLLM: A's (the trained
adapter made worse) is rolled back by one of the repo's candidate alert rules (Prometheus and
Alertmanager binaries: latency, errors or thumbs-down) carrying ``workload="a"`` through
Alertmanager's webhook and the gateway, and unloaded by the rollback flow, while B's (a copy of
the trained adapter) goes on to promotion, and no user request fails; the prompt the trainer
sees is token for token what vLLM is sent; and ``flywheel run --cycles 0 --distil`` distils the
stable version into the Llama profile's student, a full model that the release serves on a
second vLLM of its own, started before the gate, reached through the gateway and stopped at
the end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from infra.gateway.parts import Intervals
from infra.routing import load_state, save_state
from infra.settings import get_settings
from infra.store import LocalStore
from tests.e2e.test_alert_rollback import FOR, TOKEN, WINDOWS
from tests.e2e.vllm_release_helpers import Served, served, served_env  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.serial]

# the distillation of the last test: the stable LoRA version is the teacher; the first test's
# 240 requests give ~36-54 accepted answers, fewer than the default 50 a student needs. The
# gate rejects a student of so few answers whatever its steps (-10 to -14 points at 150 and
# 300 steps), so it trains briefly and is gated on an eighth of the golden set (ten turns of
# five items for the sign test of "cheaper"): this test is about where a student is served,
# and it runs in CI's serial lane beside every other test
DISTIL_ENV = {"FLYWHEEL_DISTIL__MIN_EXAMPLES": "20", "FLYWHEEL_DISTIL__STEPS": "40"}
DISTIL_GATE_ITEMS = 50
DRILL_WINDOWS = {**WINDOWS, "30m": "300s"}  # the feedback rule's window in the drill


def test_run_trains_a_lora_candidate_from_traces_and_releases_it_on_vllm(
    prefect_api: None,
    served_env: Served,  # noqa: F811
) -> None:
    from flows.loop import LoopOptions, run_loop
    from tasks.demo.loop_summary import loop_report

    assert served_env.models() == ["v0"]
    # good answers from v0's 48 %: 240 requests gave 44-46 (52 %, held), 480 98-125 (a CI run's
    # 98: 50 %, p = 0.42, held), 720 156 (68 %, p = 4e-17; the loop in 88 s)
    summary = run_loop(
        LoopOptions(
            server="vllm",
            requests=720,
            canary_steps=[50, 100],
            analysis_interval_s=2.0,
            min_requests_per_step=5,
            method="rft",
        )
    )
    print(loop_report(summary))
    cycle = summary.cycles[0]
    assert cycle.candidate == "v1", cycle.train_status
    store = LocalStore(get_settings().resolved_store_url)
    adapter = json.loads(store.get("models/v1/adapter_config.json"))
    assert adapter["peft_type"] == "LORA" and set(adapter["target_modules"]) >= {"q_proj", "v_proj"}
    assert not store.exists("models/v1/model.safetensors")  # an adapter, not a merged model
    phases = [
        e.to_phase for e in load_state(store).history if e.candidate == "v1"
    ]  # the release went through the gate, shadow and the canary steps
    assert cycle.decision is not None  # the gate decided on answers vLLM gave for v0 and v1
    assert cycle.outcome == "promoted", (cycle.decision, cycle.reasons)
    assert {"gating", "shadow", "canary", "promoted"} <= set(phases)
    assert load_state(store).stable == "v1"
    assert "v1" in served_env.models()  # the new stable is served by vLLM


def test_workload_a_is_rolled_back_by_an_alert_while_b_is_promoted_on_one_vllm(
    prefect_api: None,
    served_env: Served,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two workloads on one vLLM, both candidates loaded beside the stable adapter: A's (v1's
    adapter made worse) in canary is rolled back by a candidate alert carrying
    ``workload="a"`` and unloaded, while B's (a copy of v1's adapter) goes on through its
    canary steps to promotion; A's users are back on A's stable, and no request fails."""
    from flows.release import ReleaseOptions, release
    from flows.rollback import rollback
    from infra.gateway.serve import start_background_gateway
    from infra.routing import WorkloadRelease, new_release_id
    from infra.runtime import Runtime
    from infra.serving.base_servers import open_model_server
    from infra.serving.models import model_cache_root
    from tasks.release.machine.adapters import load_candidate
    from tests.e2e.vllm_workloads import (
        CROWD,
        Users,
        alerting,
        burst,
        feedback_inputs,
        firing,
        paced,
        publish_adapter,
    )

    rt = Runtime.from_env()
    store = rt.store
    assert isinstance(store, LocalStore)
    stable = load_state(store).stable  # v1, promoted by the first test: the shared stable
    worse, good = "v9", "v10"
    publish_adapter(store, stable, worse, scale_b=50)  # A's candidate
    publish_adapter(store, stable, good)  # B's candidate: the trained adapter again
    server = open_model_server(rt.settings, rt.store)
    assert server is not None
    for version in (worse, good):
        load_candidate(
            server,
            store,
            version,
            settings=rt.settings.model_server,
            cache_root=model_cache_root(rt.settings),
        )
    assert {stable, worse, good} <= set(served_env.models())  # three adapters on one server
    state = load_state(store)
    state.workloads = {
        w: WorkloadRelease(candidate=v, phase="canary", weight=50, release_id=new_release_id(v))
        for w, v in (("a", worse), ("b", good))
    }
    save_state(store, state, force=True)
    settings = rt.settings.model_copy(
        update={
            "gateway": rt.settings.gateway.model_copy(
                update={"admin_token": SecretStr(TOKEN), "diverse_fraction": 0}
            )
        }
    )
    rollbacks: list[tuple[str, str | None]] = []

    def rollback_flow(
        reason: str,
        workload: str | None = None,
        version: str | None = None,
        release_id: str | None = None,
    ) -> None:  # what Prefect runs, with the release the gateway rolled back
        rollbacks.append((reason, workload))
        rollback(
            reason=reason,
            actor="alertmanager",
            workload=workload,
            version=version,
            release_id=release_id,
        )

    seen: dict[str, Users] = {}
    with ExitStack() as stack:
        gw = start_background_gateway(
            settings,
            port=0,
            store=store,
            intervals=Intervals(state_s=0.2),
            on_rollback=rollback_flow,
        )
        stack.callback(gw.stop)
        assert gw.admin_url is not None
        # the feedback rule's 30 minutes as 300 s: it counts each user's first vote of the
        # step, so a window holds as many voices as new users came in it; on two cores shared
        # with the rest of the suite A's users come at well under 1 request/s, and 120 s (CI-18:
        # A never rolled back in 525 s) could hold fewer than the 20 voting users it asks for
        prom = alerting(stack, tmp_path, admin_url=gw.admin_url, windows=DRILL_WINDOWS)
        stop = threading.Event()

        def crowd() -> None:  # A's users, many: their answers trip an alert; once A is rolled
            # back they have made their point (the burst after the release checks where they
            # land), and B's release goes on without their load (they kept the engine busy for
            # the whole of B's release: 620 CPU-s, past the 900 s timeout on a slower machine).
            # Drawn from 2,000 people, so new users keep coming as in production (of 200, the
            # demo's heavy users left 29 new ones in the 120 requests after the first 240)
            seed = 0
            while not stop.is_set() and load_state(store).release_of("a").phase != "rolled_back":
                seed += 1
                burst(str(gw.admin_url), {"a": 12}, seed, seen, votes_to=gw.url, population=CROWD)

        threads = [
            threading.Thread(target=crowd, daemon=True),
            threading.Thread(
                target=paced, args=(str(gw.admin_url), "b", 1.0, stop, seen), daemon=True
            ),
        ]
        for thread in threads:
            thread.start()
        # B's candidate is v1's adapter again, while A's garbage answers (16 tokens each) slow
        # whatever shares their batches on two cores: B's canary and B's stable alike, as both
        # are read over the same window (a run that read stable over the whole release rolled
        # B's copy back at 2.5x stable's p99); B's rails stay at their defaults.
        monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_TOKEN", TOKEN)  # B's canary: /admin/metrics
        get_settings.cache_clear()
        b_out = release(
            good,
            ReleaseOptions(
                workload="b",
                canary_steps=[50, 100],
                analysis_interval_s=2.0,
                min_requests_per_step=8,
                gateway_url=gw.url,
                admin_url=gw.admin_url,
            ),
        )
        deadline = time.time() + 300
        while time.time() < deadline and load_state(store).release_of("a").phase != "rolled_back":
            time.sleep(2)
        stop.set()
        for thread in threads:
            thread.join(300)
        for thread in gw.app.state.admin.threads:  # the rollback flow the webhook started
            thread.join(120)
        after = Users()
        burst(
            str(gw.admin_url), {"a": 8}, 999, {"a": after}, votes_to=gw.url
        )  # A's users keep coming
        fired = firing(prom)
        a_inputs = feedback_inputs(prom, "a")
    state = load_state(store)
    a, b = state.release_of("a"), state.release_of("b")
    assert a.phase == "rolled_back" and worse in a.rejected, (
        f"a never rolled back: fired {fired}, rollbacks {rollbacks}, users {seen}, "
        f"the feedback rule's inputs for a, a value a minute: {a_inputs}"
    )
    assert a.stable == stable and a.weight == 0 and after.models == {stable: 8}
    assert (b_out.outcome, b.phase, b.stable) == ("promoted", "promoted", good), b_out.reasons
    assert state.stable == stable and not state.rejected  # the shared release untouched
    # one rollback, A's, named by a candidate alert that fired for A's candidate alone
    assert len(rollbacks) == 1 and rollbacks[0][1] == "a", rollbacks
    assert rollbacks[0][0].startswith(f"alert firing for {worse}: ")
    named = set(rollbacks[0][0].split(": ", 1)[1].split(", "))
    assert named and {(n, worse, "a") for n in named} <= fired, (rollbacks, fired)
    assert not {f for f in fired if f[2] != "a"}, fired  # nothing ever fired about B
    models = served_env.models()
    assert worse not in models and {stable, good} <= set(models)  # A's unloaded, B's served
    assert sum(u.failed for u in (*seen.values(), after)) == 0, seen
    assert seen["a"].models[worse] > 0 and seen["b"].models[good] > 0  # both canaries served
    shown = subprocess.run(  # what an operator sees: a line per workload
        [sys.executable, "-m", "deployments.cli", "status", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    rows = {r["workload"]: r for r in json.loads(shown.stdout)["workloads"]}
    assert (rows["a"]["stable"], rows["a"]["phase"]) == (stable, "rolled_back"), rows
    assert (rows["b"]["stable"], rows["b"]["phase"]) == (good, "promoted"), rows
    assert rows[None]["stable"] == stable
    print(f"\n{rollbacks[0][0]} (workload a) -> rolled back; b promoted {good}; FOR {FOR}")


def test_the_trainers_prompt_is_token_for_token_what_vllm_is_sent(
    served_env: Served,  # noqa: F811
) -> None:
    """A conversation with a system prompt, a tool call and its result: the prompt text the
    trainer renders (the tokenizer's chat template) tokenises exactly as vLLM tokenises the
    same messages (its /tokenize endpoint applies the served model's template)."""
    from transformers import AutoTokenizer

    from infra.serving.models import fetch_model, model_cache_root

    settings = get_settings()
    store = LocalStore(settings.resolved_store_url)
    tok = AutoTokenizer.from_pretrained(fetch_model(store, "v0", model_cache_root(settings)))
    args = json.dumps({"expression": "23 + 58"})
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "calculator", "arguments": args},
    }
    messages = [
        {"role": "system", "content": "You are a calculator agent. Answer with the number."},
        {"role": "user", "content": "Hi, I'm Jane. What is 23+58?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "calculator: 23 + 58 = 81"},
    ]
    prompt = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    trainer_ids = tok(prompt, add_special_tokens=False)["input_ids"]
    body = {"model": "v0", "messages": messages, "add_generation_prompt": True}
    resp = httpx.post(f"{served_env.url}/tokenize", json=body, headers=served_env.auth, timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.json()["tokens"] == trainer_ids
    assert "<|tool|>calculator: 23 + 58 = 81" in prompt and prompt.endswith("<|assistant|>")


def test_run_distil_serves_the_student_on_a_vllm_of_its_own_and_releases_it(
    prefect_api: None,
    served_env: Served,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``flywheel run --server vllm --cycles 0 --distil`` on the first test's curated traffic:
    the stable LoRA version (the teacher) is distilled into the Llama profile's student, a full
    model of its own base, which the release serves on a second vLLM it starts before the gate;
    the gate asks both vLLM servers and the gateway sends the student's requests to the
    student's server (the teacher's server never serves it); at the end the student's server
    is stopped and forgotten. A student of ~50 answers is well below its teacher, so the gate
    does not let it through (measured: -10.8 points, CI [-14.2, -7.3]; a student of 364 answers
    reached 98.8 % against 64.5 %): what is asserted is where it was served, and that the gate
    decided."""
    from flows.loop import LoopOptions, run_loop
    from flows.release import ReleaseOptions
    from infra.serving.base_servers import ServerTrust, read_served
    from infra.serving.vllm_process import LocalLaunchers
    from tasks.demo import loop_cycle
    from tasks.demo.loop_summary import loop_report
    from tasks.release.machine import steps as release_steps

    for key, value in DISTIL_ENV.items():
        monkeypatch.setenv(key, value)
    started: list[tuple[str, str]] = []  # (base, URL) of each server the release started
    launch = LocalLaunchers.start

    def start(self: LocalLaunchers, base: str, model_dir: str) -> list[str]:
        urls = launch(self, base, model_dir)
        started.extend((base, url) for url in urls)
        return urls

    monkeypatch.setattr(LocalLaunchers, "start", start)
    pinned: list[tuple[int, str | None]] = []  # the gateway asked for the student by name
    gate = release_steps.golden_gate_task

    def gate_then_ask(inputs: Any) -> Any:
        result = gate(inputs)  # the student's server is up (and recorded) meanwhile
        body = {
            "model": inputs.candidate.version,
            "messages": [{"role": "user", "content": "2+3?"}],
        }
        for _ in range(20):  # the gateway re-reads where versions are served every 0.5 s
            resp = httpx.post(  # as an operator pins a version: the admin listener and token
                os.environ["FLYWHEEL_GATEWAY__ADMIN_URL"] + "/v1/chat/completions",
                json=body,
                headers={"Authorization": f"Bearer {os.environ['FLYWHEEL_GATEWAY__ADMIN_TOKEN']}"},
                timeout=60,
            )
            if resp.status_code == 200:
                break
            time.sleep(0.5)
        pinned.append((resp.status_code, resp.headers.get("x-flywheel-model")))
        return result

    monkeypatch.setattr(release_steps, "golden_gate_task", gate_then_ask)
    options = loop_cycle.release_options

    def fewer_items(*args: Any, **kwargs: Any) -> ReleaseOptions:
        return options(*args, **kwargs).model_copy(update={"max_golden_items": DISTIL_GATE_ITEMS})

    monkeypatch.setattr(loop_cycle, "release_options", fewer_items)
    get_settings.cache_clear()
    store = LocalStore(get_settings().resolved_store_url)
    teacher = load_state(store).stable
    summary = run_loop(
        LoopOptions(
            server="vllm",
            cycles=0,
            distil=True,
            canary_steps=[50, 100],
            analysis_interval_s=2.0,
            min_requests_per_step=5,
        )
    )
    print(loop_report(summary))
    (d,) = summary.distilled
    assert (d.teacher, d.status) == (teacher, "trained"), d.message
    student = d.student
    assert student is not None and d.student_parameters and d.teacher_parameters
    assert d.student_parameters <= d.teacher_parameters / 4
    config = json.loads(store.get(f"models/{student}/config.json"))  # a base of its own
    assert config["hidden_size"] == 64 and not store.exists(f"models/{student}/adapter_config.json")
    assert [base for base, _ in started] == [student]  # its own vLLM, started by the release
    # the gate decided on the answers the student's own vLLM gave
    assert d.decision is not None and d.margin == 2.0, d
    log = (served_env.home / "logs" / f"vllm-{student}.log").read_text(errors="replace")
    gate_items = len(json.loads(store.get(f"gates/{student}/report.json"))["items"])
    assert log.count("POST /v1/chat/completions") >= gate_items == DISTIL_GATE_ITEMS, log[-2000:]
    # the gateway sent the student's request to the student's server, and the teacher's
    # server never served the student
    assert pinned == [(200, student)], pinned
    assert student not in served_env.models()
    phases = [e.to_phase for e in load_state(store).history if e.candidate == student]
    assert "gating" in phases and d.outcome in ("promoted", "rolled_back", "held"), d.outcome
    # the run is over: the student's server is stopped and forgotten
    assert read_served(store, ServerTrust.from_settings(get_settings())) == {}
    with pytest.raises(httpx.HTTPError):
        httpx.get(f"{started[0][1]}/health", timeout=5)
