"""End to end with a real vLLM server (CPU build, ``.venv-vllm``) on loopback, shared by the
module: the Llama profile is bootstrapped as ``v0`` and served by vLLM; ``flywheel run --server
vllm`` trains a LoRA candidate from the simulated users' traces and releases it through gate ->
shadow -> canary with traffic through the gateway to vLLM (loaded before the gate, unloaded
when it is not promoted); and the prompt the trainer sees is token for token what vLLM is sent.

Not here yet (issue 14, see the issue note): at this CI budget the candidate is not reliably
better (measured v0 66.75 % -> v1 67.7 % golden accuracy, p = 0.13), so promotion is not
asserted; the alert-rollback-and-unload test lives on branch ``vllm2`` until vLLM's HTTP 400 on
some stable requests is understood."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from infra.routing import load_state
from infra.settings import get_settings
from infra.store import LocalStore

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RUN_ENV = {
    "FLYWHEEL_PROFILE": "llama",
    "FLYWHEEL_TRAIN__USE_LORA": "true",
    "FLYWHEEL_TRAIN__MAX_STEPS": "30",
    "FLYWHEEL_TRAIN__LEARNING_RATE": "0.0002",
    "FLYWHEEL_TRAIN__MIN_PAIRS": "10",
    "FLYWHEEL_RELEASE__MIN_SHADOW_PAIRS": "10",
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
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``v0`` of the Llama profile bootstrapped into a fresh home and served by one vLLM."""
    from infra.model_server import open_model_server
    from infra.runtime import Runtime
    from infra.vllm_process import local_vllm
    from tasks.bootstrap import bootstrap_base_model

    tmp = tmp_path_factory.mktemp("vllm")
    env = {"FLYWHEEL_HOME": str(tmp / "home"), **RUN_ENV}
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
            requests=120,
            canary_steps=[50, 100],
            analysis_interval_s=2.0,
            min_requests_per_step=5,
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
    assert "gating" in phases
    if cycle.outcome == "promoted":
        assert {"shadow", "canary", "promoted"} <= set(phases)
        assert load_state(store).stable == "v1"
        assert "v1" in served_env.models()  # the new stable is served by vLLM
    else:  # users stay on v0; a rolled-back candidate leaves the server at once
        assert load_state(store).stable == "v0" and "v0" in served_env.models()
        if cycle.outcome == "rolled_back":
            assert served_env.models() == ["v0"], cycle.reasons


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
