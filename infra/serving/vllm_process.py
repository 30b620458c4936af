"""A local vLLM OpenAI server as a child process (``flywheel run --server vllm`` and the tests):
the base model served under its version name, runtime LoRA loading on, loopback only, ended
when the block exits. vLLM lives in its own virtual environment (``make vllm`` builds
``.venv-vllm``: it pins a ``transformers`` older than flywheel's).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from infra.errors import ConfigError, ModelServerError

log = logging.getLogger(__name__)

VENV_ENV = "FLYWHEEL_VLLM_VENV"
DEFAULT_VENV = Path(__file__).resolve().parents[2] / ".venv-vllm"
STARTUP_TIMEOUT_S = 600.0  # ~50 s on an idle 2-core machine; much more when it is busy


def vllm_python(venv: str | Path | None = None) -> Path:
    """The Python of the vLLM environment (``FLYWHEEL_VLLM_VENV``, else ``.venv-vllm``).

    Raises:
        ConfigError: it does not exist (run ``make vllm``).
    """
    root = Path(venv or os.environ.get(VENV_ENV) or DEFAULT_VENV).expanduser()
    python = root / "bin" / "python"
    if not python.is_file():
        raise ConfigError(f"no vLLM environment at {root}: run `make vllm` (or set {VENV_ENV})")
    if not any(root.glob("lib/python*/site-packages/vllm/__init__.py")):
        raise ConfigError(f"the environment at {root} has no vllm package: run `make vllm`")
    return python


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], log_path: Path, timeout: float) -> None:
    import httpx

    from infra.http import tls

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise ModelServerError(f"vLLM exited with {proc.returncode} while starting:\n{tail}")
        try:
            if httpx.get(url + "/health", timeout=2.0, verify=tls()).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise ModelServerError(f"vLLM did not answer {url}/health within {timeout:.0f} s ({log_path})")


def model_context(model_dir: str | Path) -> int:
    """The context length in ``model_dir``'s ``config.json`` (``max_position_embeddings``, or
    ``n_positions``): what vLLM is started with, so every request the model can take is served
    (a shorter ``--max-model-len`` answers longer conversations with HTTP 400)."""
    cfg = json.loads((Path(model_dir) / "config.json").read_text())
    return int(cfg.get("max_position_embeddings") or cfg.get("n_positions") or 2048)


@dataclass(frozen=True, kw_only=True)
class Engine:
    """The vLLM server's engine flags. ``max_loras``: adapters it holds and batches together
    (``--max-loras``; the settings' ``model_server.max_loras``, which the release enforces);
    ``max_lora_rank``: ``--max-lora-rank``; ``max_model_len``: ``--max-model-len`` (None: the
    model's own context, :func:`model_context`); ``memory_fraction``:
    ``--gpu-memory-utilization``, 0.08 of this machine's 23 GiB is ~1.9 GiB (the default 0.92
    fails when other processes hold memory)."""

    max_loras: int = 3
    max_lora_rank: int = 16
    max_model_len: int | None = None
    memory_fraction: float = 0.08


@contextmanager
def local_vllm(
    model_dir: str | Path,
    *,
    served_name: str = "v0",
    engine: Engine | None = None,
    log_path: Path,
    api_key: str | None = None,
    venv: str | Path | None = None,
    timeout_s: float = STARTUP_TIMEOUT_S,
) -> Iterator[str]:
    """Run vLLM on ``model_dir`` (served as ``served_name``, with the ``engine`` flags,
    default :class:`Engine`'s) on a free loopback port; yields its base URL
    (``http://127.0.0.1:<port>``). ``api_key``: the bearer key it requires on ``/v1/*``
    (``Settings.model_server_key``; None, for benchmarks only: open); it gets only the
    environment :func:`launch_environment` lets through.

    Raises:
        ConfigError: no vLLM environment.
        ModelServerError: it exited or did not become healthy in time.
    """
    python = vllm_python(venv)
    port = _free_port()
    engine = engine or Engine()
    max_model_len = engine.max_model_len
    if max_model_len is None:
        max_model_len = model_context(model_dir)
    max_loras, max_lora_rank = engine.max_loras, engine.max_lora_rank
    args = [
        str(python),
        "-m",
        "vllm.entrypoints.openai.api_server",
        *("--model", str(model_dir), "--served-model-name", served_name),
        *("--enable-lora", "--max-loras", str(max_loras), "--max-lora-rank", str(max_lora_rank)),
        *("--max-model-len", str(max_model_len), "--host", "127.0.0.1", "--port", str(port)),
        # on the CPU build this is the share of the machine's RAM vLLM takes (KV cache
        # included) and must be free at startup: a small share for the demo-size model
        *("--gpu-memory-utilization", str(engine.memory_fraction)),
    ]
    if api_key is not None:
        args += ["--api-key", api_key]
    env = {**launch_environment(os.environ), "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)  # noqa: S603
        try:
            log.info("starting vLLM on %s (log: %s)", url, log_path)
            _wait_healthy(url, proc, log_path, timeout_s)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# what a launched model server inherits: the system's, the accelerator's and its own
# libraries' variables; never flywheel's settings (keys, salt, tokens), cloud credentials or
# anything else this process holds
_LAUNCH_NAMES = frozenset({"PATH", "HOME", "USER", "LANG", "LC_ALL", "TZ", "TMPDIR", "TERM"})
_LAUNCH_PREFIXES = tuple(
    [
        "LC_",
        "VLLM_",
        "HF_",
        "TRANSFORMERS_",
        "CUDA_",
        "NVIDIA_",
        "OMP_",
        "MKL_",
        "OPENBLAS_",
        "TORCH",
        "PYTORCH_",
        "LD_",
        "XDG_",
        "NCCL_",
    ]
)


def launch_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` a launched model server may see (see ``_LAUNCH_NAMES``)."""
    return {k: v for k, v in env.items() if k in _LAUNCH_NAMES or k.startswith(_LAUNCH_PREFIXES)}


class LocalLaunchers:
    """The :class:`~infra.serving.base_servers.Launcher` of ``flywheel run --server vllm``: one
    local vLLM per base model this process's releases load (a distilled student), each started by
    :func:`local_vllm` with the configured server's LoRA settings (``engine``), all ended by :meth:`close`
    (or when the block of ``with LocalLaunchers(...)`` exits)."""

    def __init__(
        self,
        *,
        log_dir: Path,
        engine: Engine,
        api_key: str,
        venv: str | Path | None = None,
        timeout_s: float = STARTUP_TIMEOUT_S,
    ) -> None:
        self.log_dir = log_dir
        self.api_key = api_key
        self.engine = engine
        self.venv, self.timeout_s = venv, timeout_s
        self._servers: dict[str, tuple[ExitStack, list[str]]] = {}

    def start(self, base: str, model_dir: str) -> list[str]:
        """Serve ``model_dir`` as ``base`` (its URL; the running one when it is up already)."""
        if base in self._servers:
            return list(self._servers[base][1])
        stack = ExitStack()
        url = stack.enter_context(
            local_vllm(
                model_dir,
                served_name=base,
                engine=self.engine,
                log_path=self.log_dir / f"vllm-{base}.log",
                api_key=self.api_key,
                venv=self.venv,
                timeout_s=self.timeout_s,
            )
        )
        self._servers[base] = (stack, [url])
        return [url]

    def stop(self, base: str) -> None:
        """End ``base``'s server (nothing when none runs)."""
        entry = self._servers.pop(base, None)
        if entry is not None:
            entry[0].close()

    def running(self) -> dict[str, list[str]]:
        """The bases served now, with their URLs."""
        return {base: list(urls) for base, (_, urls) in self._servers.items()}

    def close(self) -> None:
        """End every server this launcher started."""
        for base in list(self._servers):
            self.stop(base)

    def __enter__(self) -> LocalLaunchers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
