"""Pre-train the base models the tests bootstrap into the tests' shared build cache, before the
tests start: ``make test`` runs this beside its set-up (system packages, the S3 server, the vLLM
environment: mostly waiting on disks and the package index) and ``.ci/run`` beside lint and
docs, so the pre-training overlaps that waiting instead of running inside the end-to-end tests
beside the other test workers. The loop's v0 (the default configuration) is copied from the
build shipped in ``tasks/demo/shipped_v0``, the exploitable-judge test's small v0 from the one
shipped in ``tests/data/shipped_v0`` (each pre-trained instead where the code asks for other
inputs than the shipped build's).

    python -m tests.prebuild_bootstrap DIR
    python -m tests.prebuild_bootstrap --ship     (pre-train the small v0 again and ship it)

The tests find the builds through ``FLYWHEEL_TEST_BOOTSTRAP_CACHE=DIR`` (``tests/conftest.py``,
``bootstrap_cache``); a build is used only where its input hash (config, seed, golden set,
recipe version) is the one a test asks for, and a test still waiting on one here waits on the
build's lock, as two test workers would. Each config is built in a home of its own, with the
settings a test starts from (no ``FLYWHEEL_*`` variable of the caller, no ``.env``)."""

from __future__ import annotations

import sys
from pathlib import Path


def _judge_env() -> dict[str, str]:
    """The environment tests/e2e/test_exploitable_judge.py bootstraps its small v0 in."""
    from tests.e2e.test_exploitable_judge import HEDGE_SHARE

    return {"FLYWHEEL_BOOTSTRAP_HEDGE_SHARE": HEDGE_SHARE, "FLYWHEEL_WORKLOADS": '["calculator"]'}


def _build(cache: Path, env: dict[str, str], small: bool, *, force: bool = False) -> str:
    """Bootstrap in a fresh home with ``env`` (over a clean FLYWHEEL_* environment); the
    build stays in ``cache``. Returns its input hash."""
    from contextlib import nullcontext

    from infra.store import open_store
    from tasks.demo.bootstrap import bootstrap_base_model
    from tasks.demo.ship_v0 import scratch_home
    from tests.e2e.test_exploitable_judge import shipped_small, small_config

    with (
        scratch_home("prebuild-", {"FLYWHEEL_BOOTSTRAP_CACHE_DIR": str(cache), **env}) as s,
        shipped_small() if small else nullcontext(),
    ):
        config = small_config() if small else None
        result = bootstrap_base_model(open_store(s), settings=s, config=config, force=force)
    print(f"prebuilt {result.input_hash}: {result.describe()}", flush=True)
    return result.input_hash


def _ship_small() -> int:
    """Pre-train the small hedging v0 from scratch and ship it in place of the shipped one."""
    import shutil
    import tempfile

    from tests.e2e.test_exploitable_judge import SHIPPED_SMALL

    cache = Path(tempfile.mkdtemp(prefix="ship-small-"))
    key = _build(cache, _judge_env(), small=True, force=True)
    shutil.rmtree(SHIPPED_SMALL, ignore_errors=True)
    shutil.copytree(cache / key, SHIPPED_SMALL / key)
    shutil.rmtree(cache, ignore_errors=True)
    print(f"shipped {SHIPPED_SMALL / key}")
    return 0


def main(argv: list[str]) -> int:
    """Build the loop's v0 (the demo's two workloads) and the exploitable-judge test's small
    hedging v0 into ``argv[0]``."""
    if argv == ["--ship"]:
        return _ship_small()
    if len(argv) != 1:
        print("usage: python -m tests.prebuild_bootstrap DIR | --ship", file=sys.stderr)
        return 2
    cache = Path(argv[0]).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    from tasks.demo import pretrain_loop

    # on one process: this runs beside the set-up, lint and docs (or the tests), which keep
    # the other core busy; a second process there only takes CPU from them (v0 is the same
    # bit for bit either way, and so is its cache key)
    pretrain_loop.HELPER_MIN_STEPS = sys.maxsize
    _build(cache, {}, small=False)  # tests/e2e/test_loop.py
    _build(cache, _judge_env(), small=True)  # tests/e2e/test_exploitable_judge.py
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
