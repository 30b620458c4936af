"""End to end with a real vLLM server (CPU build, ``.venv-vllm``) on loopback, shared by the
module: the Llama profile is bootstrapped as ``v0`` and served by vLLM; ``flywheel run --server
vllm`` trains a LoRA candidate from the simulated users' traces and releases it through gate ->
shadow -> canary with traffic through the gateway to vLLM (loaded before the gate, unloaded
when it is not promoted) to promotion; then a candidate made worse (its adapter weights
scrambled) is put in canary, one of the repo's candidate alert rules (Prometheus and
Alertmanager binaries: latency, errors or thumbs-down) fires, Alertmanager's webhook rolls it back through the gateway, the
rollback flow unloads it from vLLM, and no user request fails; and the prompt the trainer sees
is token for token what vLLM is sent."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from infra.routing import RoutingState, load_state, save_state
from infra.settings import get_settings
from infra.store import LocalStore
from tests.e2e.test_alert_rollback import (
    FOR,
    TOKEN,
    alertmanager_config,
    firing_since,
    prometheus_config,
)
from tests.procs import find_binary, free_port, service

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RUN_ENV = {
    "FLYWHEEL_PROFILE": "llama",
    "FLYWHEEL_TRAIN__USE_LORA": "true",
    # RFT (SFT on the best-rewarded answers) at LoRA lr 2e-3 for 120 steps (flows.loop_server's
    # recipe): 240 requests give 36-49 high-reward answers; on the weakest sample v0 0.4325 ->
    # 0.55-0.56 golden accuracy over three training seeds (60 steps: 0.425-0.465, and a CI run
    # held at 0.412); 120 requests gave 17-24 and once a worse v1
    "FLYWHEEL_TRAIN__MAX_STEPS": "120",
    "FLYWHEEL_TRAIN__LEARNING_RATE": "0.002",
    "FLYWHEEL_TRAIN__MIN_PAIRS": "10",
    # the shadow phase at its default 30 pairs: at 10, one run of four rolled a candidate 18
    # points better on the golden set back on 13 pairs (0.69 -> 0.56, one-sided p 0.041)
}


@dataclass
class Served:
    home: Path
    url: str  # vLLM's root URL
    env: dict[str, str]

    def models(self) -> list[str]:
        data = httpx.get(f"{self.url}/v1/models", timeout=10).json()["data"]
        return sorted(str(m["id"]) for m in data)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, bootstrap_cache: Path) -> Iterator[Served]:
    """``v0`` of the Llama profile bootstrapped into a fresh home and served by one vLLM."""
    from infra.model_server import open_model_server
    from infra.runtime import Runtime
    from infra.vllm_process import local_vllm
    from tasks.demo.bootstrap import bootstrap_base_model

    tmp = tmp_path_factory.mktemp("vllm")
    env = {
        "FLYWHEEL_HOME": str(tmp / "home"),
        "FLYWHEEL_BOOTSTRAP_CACHE_DIR": str(bootstrap_cache),
        **RUN_ENV,
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        get_settings.cache_clear()
        rt = Runtime.from_env()
        boot = bootstrap_base_model(rt.store, settings=rt.settings)
        with local_vllm(boot.model_dir, served_name="v0", log_path=tmp / "vllm.log") as url:
            env |= {
                "FLYWHEEL_MODEL_SERVER__KIND": "vllm",
                "FLYWHEEL_MODEL_SERVER__URLS": json.dumps([url]),
            }
            mp.setenv("FLYWHEEL_MODEL_SERVER__KIND", "vllm")
            mp.setenv("FLYWHEEL_MODEL_SERVER__URLS", json.dumps([url]))
            get_settings.cache_clear()
            server = open_model_server(get_settings().model_server)
            assert server is not None and server.health() is None
            yield Served(home=tmp / "home", url=url, env=env)
    get_settings.cache_clear()


@pytest.fixture
def served_env(served: Served, monkeypatch: pytest.MonkeyPatch) -> Served:
    for key, value in served.env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    return served


def test_run_trains_a_lora_candidate_from_traces_and_releases_it_on_vllm(
    prefect_api: None, served_env: Served
) -> None:
    from flows.loop import LoopOptions, loop_report, run_loop

    assert served_env.models() == ["v0"]
    summary = run_loop(
        LoopOptions(
            server="vllm",
            requests=240,
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


CANDIDATE_ALERTS = (
    "CandidateModelRegression",
    "CandidateLatencyRegression",
    "CandidateNegativeFeedback",
)


def scrambled_adapter(store: LocalStore, source: str, version: str) -> None:
    """Publish ``version``: ``source``'s adapter with its LoRA B weights scaled up 50x (a
    candidate made worse; the same shape, so vLLM loads it)."""
    from safetensors.torch import load_file, save_file

    from infra.models import publish_model_dir

    work = store.root.parent / f"scrambled-{version}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    prefix = f"models/{source}/"
    for key in store.list(prefix):
        rel = key[len(prefix) :]
        if rel != "_COMPLETE":
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            (work / rel).write_bytes(store.get(key))
    weights = load_file(str(work / "adapter_model.safetensors"))
    worse = {k: (v * 50 if "lora_B" in k else v) for k, v in weights.items()}
    save_file(worse, str(work / "adapter_model.safetensors"))
    publish_model_dir(store, version, work)


def traffic(url: str, *, requests: int, seed: int) -> Any:
    """Simulated users through the gateway, every one of them giving honest feedback."""
    from tasks.demo.simulate import simulate

    return simulate(
        url,
        requests=requests,
        concurrency=4,
        seed=seed,
        settings=get_settings(),
        feedback_fraction=1.0,
        feedback_noise=0.0,
    )


def ever_fired(prometheus: str) -> set[str]:
    """The candidate alerts Prometheus recorded as firing in the last 30 minutes (its
    ``ALERTS`` series), however briefly."""
    query = 'count by (alertname) (max_over_time(ALERTS{alertstate="firing"}[30m]))'
    data = httpx.get(f"{prometheus}/api/v1/query", params={"query": query}, timeout=5).json()
    names = {r["metric"].get("alertname") for r in data["data"]["result"]}
    return names & set(CANDIDATE_ALERTS)


def test_a_worse_candidate_is_rolled_back_by_an_alert_and_unloaded(
    prefect_api: None, served_env: Served, tmp_path: Path
) -> None:
    from flows.rollback import rollback
    from infra.gateway.serve import start_background_gateway
    from infra.model_server import open_model_server
    from infra.models import model_cache_root
    from infra.runtime import Runtime
    from tasks.release.adapters import load_candidate

    rt = Runtime.from_env()
    store = rt.store
    assert isinstance(store, LocalStore)
    stable = load_state(store).stable  # v1, promoted by the test above
    assert store.exists("models/v1/_COMPLETE")  # its adapter, made worse, is the candidate
    worse = "v9"
    scrambled_adapter(store, "v1", worse)
    server = open_model_server(rt.settings.model_server)
    assert server is not None
    load_candidate(
        server,
        store,
        worse,
        settings=rt.settings.model_server,
        cache_root=model_cache_root(rt.settings),
    )
    assert worse in served_env.models()
    settings = rt.settings.model_copy(
        update={
            "gateway": rt.settings.gateway.model_copy(
                update={"admin_token": SecretStr(TOKEN), "diverse_fraction": 0}
            )
        }
    )
    rollbacks: list[str] = []

    def rollback_flow(reason: str) -> None:  # what the gateway asks Prefect to run
        rollbacks.append(reason)
        rollback(reason=reason, actor="alertmanager")

    with ExitStack() as stack:
        gw = start_background_gateway(
            settings, port=0, store=store, state_interval_s=0.2, on_rollback=rollback_flow
        )
        stack.callback(gw.stop)
        assert gw.admin_url is not None
        am_port, prom_port = free_port(), free_port()
        am_args = [
            find_binary("alertmanager"),
            f"--config.file={alertmanager_config(tmp_path, admin_url=gw.admin_url)}",
            f"--storage.path={tmp_path / 'am'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",
        ]
        stack.enter_context(
            service(am_args, f"http://127.0.0.1:{am_port}/-/ready", tmp_path / "am.log")
        )
        prom = f"http://127.0.0.1:{prom_port}"
        prom_cfg = prometheus_config(
            tmp_path,
            gateway=gw.url.removeprefix("http://"),
            alertmanager=f"127.0.0.1:{am_port}",
            self_addr=f"127.0.0.1:{prom_port}",
        )
        prom_args = [
            find_binary("prometheus"),
            f"--config.file={prom_cfg}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ]
        stack.enter_context(service(prom_args, f"{prom}/-/ready", tmp_path / "prom.log"))
        canary = RoutingState(stable=stable, candidate=worse, phase="canary", weight=50)
        save_state(store, canary, force=True)
        summaries: list[Any] = []
        fired: set[str] = set()
        deadline = time.time() + 300
        seed = 0
        while time.time() < deadline and load_state(store).phase != "rolled_back":
            seed += 1
            summaries.append(traffic(gw.url, requests=20, seed=seed))  # thumbs up/down
            fired |= {name for name in CANDIDATE_ALERTS if firing_since(prom, name)}
        summaries.append(traffic(gw.url, requests=12, seed=seed + 1))  # users keep coming
        fired |= {name for name in CANDIDATE_ALERTS if firing_since(prom, name)}
        fired |= ever_fired(prom)  # one that fired and resolved between two looks above
        for thread in gw.app.state.admin.threads:  # the rollback flow the webhook started
            thread.join(120)
    state = load_state(store)
    assert state.phase == "rolled_back" and worse in state.rejected, "never rolled back"
    # the worse candidate's garbage answers run to max_tokens and draw thumbs-down: a
    # candidate alert (slower or worse-rated than stable) fired, and its webhook rolled it back
    assert len(rollbacks) == 1 and rollbacks[0].startswith(f"alert firing for {worse}: ")
    named = set(rollbacks[0].split(": ", 1)[1].split(", "))
    assert named and named <= fired, (rollbacks, fired)
    assert worse not in served_env.models()  # the rollback flow unloaded it from vLLM
    assert stable in served_env.models()
    assert sum(s.failed for s in summaries) == 0, [s.describe() for s in summaries]
    assert sum(s.models[worse] for s in summaries) > 0  # the canary did serve users
    print(f"\n{rollbacks[0]} -> rolled back, unloaded: {len(summaries)} bursts; FOR {FOR}")


def test_the_trainers_prompt_is_token_for_token_what_vllm_is_sent(served_env: Served) -> None:
    """A conversation with a system prompt, a tool call and its result: the prompt text the
    trainer renders (the tokenizer's chat template) tokenises exactly as vLLM tokenises the
    same messages (its /tokenize endpoint applies the served model's template)."""
    from transformers import AutoTokenizer

    from infra.models import fetch_model, model_cache_root

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
    resp = httpx.post(f"{served_env.url}/tokenize", json=body, timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.json()["tokens"] == trainer_ids
    assert "<|tool|>calculator: 23 + 58 = 81" in prompt and prompt.endswith("<|assistant|>")
