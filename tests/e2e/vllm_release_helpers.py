"""The vLLM e2e test's server (tests/e2e/test_vllm_release.py): the run's settings
(:data:`RUN_ENV`: the Llama profile, LoRA training, two workloads) and ``v0`` of the Llama
profile bootstrapped into a fresh home and served by one vLLM for the whole module
(:func:`served`, :func:`served_env`: fixtures the test module imports)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from infra.settings import get_settings

RUN_ENV = {
    "FLYWHEEL_PROFILE": "llama",
    "FLYWHEEL_TRAIN__USE_LORA": "true",
    # RFT (SFT on the best-rewarded answers) at LoRA lr 2e-3 for 120 steps (tasks.demo.serving's
    # recipe): 240 requests give 36-49 high-reward answers; on the weakest sample v0 0.4325 ->
    # 0.55-0.56 golden accuracy over three training seeds (60 steps: 0.425-0.465, and a CI run
    # held at 0.412); 120 requests gave 17-24 and once a worse v1
    "FLYWHEEL_TRAIN__MAX_STEPS": "120",
    "FLYWHEEL_TRAIN__LEARNING_RATE": "0.002",
    "FLYWHEEL_TRAIN__MIN_PAIRS": "10",
    # the shadow phase at its default 30 pairs: at 10, one run of four rolled a candidate 18
    # points better on the golden set back on 13 pairs (0.69 -> 0.56, one-sided p 0.041)
    # this recipe is 38 epochs over ~50 answers of two or three digits, so the candidate ends up
    # sure of its answer tokens, and how sure depends on which ~50 answers the traffic gave:
    # KL(v1 || v0) was 0.43 nats/token on a quiet machine (twice, 51 answers) and 1.18 in a CI
    # run under load (53 answers: v0 48 % -> v1 67 % golden, p 1e-12; held by the default
    # 1.0). The KL check and its default are tested in test_release_gate_local and
    # test_release; this test is about the release path through vLLM, not the threshold
    "FLYWHEEL_RELEASE__KL_MAX": "2.5",
    # workloads a and b named by the configuration: vLLM holds 2 * (2 + 1) + 1 adapters
    "FLYWHEEL_WORKLOADS": '["a", "b"]',
}


@dataclass
class Served:
    home: Path
    url: str  # vLLM's root URL
    env: dict[str, str]
    key: str  # its --api-key: a call without it is refused

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def models(self) -> list[str]:
        resp = httpx.get(f"{self.url}/v1/models", headers=self.auth, timeout=10)
        return sorted(str(m["id"]) for m in resp.json()["data"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, bootstrap_cache: Path) -> Iterator[Served]:
    """``v0`` of the Llama profile bootstrapped into a fresh home and served by one vLLM."""
    from infra.runtime import Runtime
    from infra.serving.base_servers import open_model_server
    from infra.serving.vllm_process import Engine, local_vllm
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
        slots = rt.settings.model_server.max_loras or 1
        key = rt.settings.model_server_key()
        with local_vllm(
            boot.model_dir,
            served_name="v0",
            engine=Engine(max_loras=slots),
            log_path=tmp / "vllm.log",
            api_key=key,  # every call below must carry it
        ) as url:
            env |= {
                "FLYWHEEL_MODEL_SERVER__KIND": "vllm",
                "FLYWHEEL_MODEL_SERVER__URLS": json.dumps([url]),
            }
            mp.setenv("FLYWHEEL_MODEL_SERVER__KIND", "vllm")
            mp.setenv("FLYWHEEL_MODEL_SERVER__URLS", json.dumps([url]))
            get_settings.cache_clear()
            server = open_model_server(get_settings(), rt.store)
            assert server is not None and server.health() is None
            unkeyed = httpx.get(f"{url}/v1/models", timeout=10)
            assert unkeyed.status_code == 401, unkeyed.text  # the server is not open
            yield Served(home=tmp / "home", url=url, env=env, key=key)
    get_settings.cache_clear()


@pytest.fixture
def served_env(served: Served, monkeypatch: pytest.MonkeyPatch) -> Served:
    for key, value in served.env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    return served
