"""Rebuild the shipped v0 (:data:`tasks.demo.bootstrap.SHIPPED`): the default configuration's
base model, pre-trained from scratch (about five minutes of one core) in a scratch home, then
kept as ``tasks/demo/shipped_v0/<input hash>`` in place of any other build there.

    python -m tasks.demo.ship_v0        (make v0)

Run it after a change that bumps :data:`tasks.demo.bootstrap.CODE_VERSION` (or otherwise
changes the default configuration's input hash): ``tests/unit/test_shipped_v0.py`` fails until
the shipped build is the one the code asks for. Where a build of the same hash is shipped
already, it says whether the new one is the same bit for bit."""

from __future__ import annotations

import filecmp
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.settings import Settings


@contextmanager
def scratch_home(prefix: str, env: dict[str, str] | None = None) -> Iterator[Settings]:
    """The settings a fresh install starts from, in a scratch home: no ``FLYWHEEL_*`` variable
    of the caller's, no ``.env`` (the working directory is the scratch directory), ``env``
    over them. The scratch directory is removed afterwards; ``FLYWHEEL_*`` stays as set here."""
    from infra.settings import get_settings

    for name in [n for n in os.environ if n.startswith("FLYWHEEL_")]:
        del os.environ[name]
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    before = Path.cwd()
    os.chdir(scratch)
    os.environ.update({"FLYWHEEL_HOME": str(scratch / "home"), **(env or {})})
    get_settings.cache_clear()
    try:
        yield get_settings()
    finally:
        os.chdir(before)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    """Build, compare with the shipped build of the same inputs, keep the new one."""
    from infra.store import open_store
    from tasks.demo import bootstrap

    with scratch_home("ship-v0-") as settings:  # the default configuration, whatever the
        # caller's environment
        result = bootstrap.bootstrap_base_model(open_store(settings), settings=settings, force=True)
        built = bootstrap.build_cache_root(settings) / result.input_hash
        target = bootstrap.SHIPPED / result.input_hash
        if target.is_dir():
            same = filecmp.cmp(
                built / "model" / "model.safetensors",
                target / "model" / "model.safetensors",
                shallow=False,
            )
            print(f"weights {'the same' if same else 'DIFFERENT'} as the shipped {target.name}")
        for old in bootstrap.SHIPPED.iterdir() if bootstrap.SHIPPED.is_dir() else []:
            shutil.rmtree(old)
        shutil.copytree(built, target)
    print(f"shipped {target}: {result.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
