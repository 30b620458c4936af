"""Where ``flywheel run`` serves its models: in the gateway's own process (``local``, the demo
GPT-2), or on a real local vLLM server (``vllm``: the Llama profile, candidates trained and
released as LoRA adapters loaded into the server at run time)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from infra.routing import load_state
from infra.runtime import Runtime
from infra.serving.base_servers import open_model_server
from infra.serving.models import model_cache_root
from infra.settings import get_settings
from tasks.release.machine.adapters import load_candidate

Server = Literal["local", "vllm"]


@contextmanager
def environment(**values: str) -> Iterator[None]:
    """Set environment variables (and re-read settings) for the block, then restore them."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    get_settings.cache_clear()
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        get_settings.cache_clear()


# The Llama profile's training recipe, unless the environment sets it: on the few dozen
# high-reward answers a short simulated run yields, RFT on LoRA at a high learning rate moves
# the adapter reliably; half the steps is not always enough, and DPO at the full-model
# defaults leaves the adapter answering as v0 does (README, "Serving with vLLM")
LLAMA_METHOD: Literal["rft"] = "rft"
LLAMA_TRAINING = {"FLYWHEEL_TRAIN__LEARNING_RATE": "0.002", "FLYWHEEL_TRAIN__MAX_STEPS": "120"}


# The demo model's recipe, unless the environment sets it: 120 DPO steps, not the default 200.
# The gate holds a candidate that drifted over kl_max (1.0 nats/token) from its baseline, and
# the demo's 200 steps on one cycle's 800 pairs landed at 0.62 on one run's traffic and 1.006
# on another's (held); 120 steps on the first run's pairs drift 0.41 for nearly all the gain
# (golden reward 0.70 -> 0.79, p 4e-13, against 0.80 at 200 steps)
DEMO_TRAINING = {"FLYWHEEL_TRAIN__MAX_STEPS": "120"}


def profile_environment(server: Server) -> dict[str, str]:
    """The settings a server choice implies: vLLM serves the Llama profile and trains adapters
    with the profile's recipe, the demo model its own (each setting the environment already
    has is left alone)."""
    recipe = LLAMA_TRAINING if server == "vllm" else DEMO_TRAINING
    unset = {k: v for k, v in recipe.items() if k not in os.environ}
    if server == "vllm":
        return {"FLYWHEEL_PROFILE": "llama", "FLYWHEEL_TRAIN__USE_LORA": "true", **unset}
    return unset


@contextmanager
def serving(server: Server, *, base_version: str) -> Iterator[None]:
    """For ``vllm``: start vLLM on the base version (ended at exit; unless the model-server
    settings already name a running one), point the model-server settings at it, and load the
    stable version's adapter when the stable is not the base. Releases in the block start a
    vLLM of their own for a base model the configured server does not serve (a distilled
    student), ended at exit too."""
    if server != "vllm":
        yield
        return
    if (rt := Runtime.from_env()).settings.model_server.enabled:  # a server already running
        with _launchers(rt):
            _load_stable(rt, base_version)
            yield
        return
    from infra.serving.models import fetch_model
    from infra.serving.vllm_process import Engine, local_vllm

    base_dir = fetch_model(rt.store, base_version, model_cache_root(rt.settings))
    log_path = rt.settings.home_dir / "logs" / "vllm.log"
    ms = rt.settings.model_server
    with local_vllm(
        base_dir,
        served_name=base_version,
        engine=Engine(max_loras=ms.max_loras or 1, max_lora_rank=ms.max_lora_rank),
        log_path=log_path,
        api_key=rt.settings.model_server_key(),
    ) as url:
        env = {
            "FLYWHEEL_MODEL_SERVER__KIND": "vllm",
            "FLYWHEEL_MODEL_SERVER__URLS": json.dumps([url]),
            "FLYWHEEL_MODEL_SERVER__BASE_VERSION": base_version,
        }
        with environment(**env), _launchers(rt := Runtime.from_env()):
            _load_stable(rt, base_version)
            yield


@contextmanager
def _launchers(rt: Runtime) -> Iterator[None]:
    """A launcher for other bases' vLLM servers in the block; at exit they are ended and
    forgotten in the store's map of where versions are served."""
    from infra.serving.base_servers import ServerTrust, launching, read_served, record_served
    from infra.serving.vllm_process import Engine, LocalLaunchers

    ms = rt.settings.model_server
    trust = ServerTrust.from_settings(rt.settings)
    _forget_dead(rt)
    with LocalLaunchers(
        log_dir=rt.settings.home_dir / "logs",
        engine=Engine(max_loras=ms.max_loras or 1, max_lora_rank=ms.max_lora_rank),
        api_key=rt.settings.model_server_key(),
    ) as launchers:
        try:
            with launching(launchers):
                yield
        finally:
            ended = {tuple(urls) for urls in launchers.running().values()}
            launchers.close()
            gone = [v for v, at in read_served(rt.store, trust).items() if at.urls in ended]
            if gone:
                record_served(rt.store, dict.fromkeys(gone), trust)


def _forget_dead(rt: Runtime) -> None:
    """Forget the recorded servers of other bases that do not answer (a run that ended without
    its clean-up left them): a release then starts them again instead of routing to nothing."""
    from infra.serving.base_servers import ServerTrust, read_served, record_served
    from infra.serving.model_server import VLLMServer

    trust = ServerTrust.from_settings(rt.settings)
    dead = {
        v
        for v, at in read_served(rt.store, trust).items()
        if at.base not in rt.settings.model_server.bases
        and VLLMServer(list(at.urls), base_version=at.base, timeout_s=5.0).health() is not None
    }
    if dead:
        record_served(rt.store, dict.fromkeys(dead), trust)


def _load_stable(rt: Runtime, base_version: str) -> None:
    """A stable version that is not the base (an adapter, or a student on a server of its own,
    started here) is loaded: a fresh server serves the base only."""
    server = open_model_server(rt.settings, rt.store)
    stable = load_state(rt.store).stable
    if server is not None and stable != base_version:
        load_candidate(
            server,
            rt.store,
            stable,
            settings=rt.settings.model_server,
            cache_root=model_cache_root(rt.settings),
        )
