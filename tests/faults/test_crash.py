"""SIGKILL a stage at an exact point, then rerun it: the rerun leaves what a run that never
crashed leaves (every data table row for row, the same model versions), and nothing a crash
left half-written is ever listed or servable. The crash points are the test-only hooks of
:mod:`infra.faults` (``FLYWHEEL_TEST_KILL_AT``); the kill is a real ``SIGKILL``."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults.stages import (
    WINDOW_START,
    contents,
    copy_home,
    flywheel,
    prepare_home,
    table_rows,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]
KILLED = -9


@pytest.fixture(scope="module")
def api_url(prefect_api: None) -> Iterator[str]:
    """The session's Prefect API, handed to every stage process."""
    from prefect.settings import PREFECT_API_URL

    yield str(PREFECT_API_URL.value())


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The starting state of every scenario: v0 and one planted, scored window."""
    home = tmp_path_factory.mktemp("template") / "home"
    prepare_home(home)
    return home


@pytest.fixture(scope="module")
def clean(template: Path, api_url: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run without faults: curate then train; its contents after each, and the home as
    it was after curate (where the train scenarios start)."""
    base = tmp_path_factory.mktemp("clean")
    home = copy_home(template, base / "home")
    done = flywheel("curate", "--window-start", WINDOW_START, home=home, api_url=api_url)
    assert done.returncode == 0, done.stderr
    curated = contents(home)
    copy_home(home, base / "curated")
    done = flywheel("train", "--max-steps", "1", home=home, api_url=api_url)
    assert done.returncode == 0, done.stderr
    trained = contents(home)
    assert curated["training_examples"] and trained["preference_pairs"]
    assert trained["models"] == ["v0", "v1"]
    return {"curated": curated, "trained": trained, "curated_home": base / "curated"}


def test_curate_killed_inside_its_iceberg_commit_then_rerun_equals_a_clean_run(
    template: Path, clean: dict[str, Any], api_url: str, tmp_path: Path
) -> None:
    home = copy_home(template, tmp_path / "home")
    args = ("curate", "--window-start", WINDOW_START)

    killed = flywheel(
        *args, home=home, api_url=api_url, FLYWHEEL_TEST_KILL_AT="catalog.commit:training_examples"
    )
    assert killed.returncode == KILLED, killed.stderr
    assert table_rows(home, "training_examples") == []  # data files written, never committed

    rerun = flywheel(*args, home=home, api_url=api_url)
    assert rerun.returncode == 0, rerun.stderr
    assert contents(home) == clean["curated"]


def test_train_killed_during_publish_then_rerun_equals_a_clean_run(
    clean: dict[str, Any], api_url: str, tmp_path: Path
) -> None:
    from infra.serving.models import ServableVersions, list_versions
    from infra.settings import Settings
    from infra.store import LocalStore

    home = copy_home(clean["curated_home"], tmp_path / "home")
    store = LocalStore(Settings(home=home).resolved_store_url)

    killed = flywheel(
        "train",
        "--max-steps",
        "1",
        home=home,
        api_url=api_url,
        FLYWHEEL_TEST_KILL_AT="store.put:models/v1/#2",  # one file of v1 uploaded
    )
    assert killed.returncode == KILLED, killed.stderr
    assert store.list("models/v1/")  # half a version in the store ...
    assert list_versions(store) == ["v0"]  # ... never listed
    assert not ServableVersions(store).servable("v1")  # ... nor servable

    rerun = flywheel("train", "--max-steps", "1", home=home, api_url=api_url)
    assert rerun.returncode == 0, rerun.stderr
    assert contents(home) == clean["trained"]


def test_a_stage_killed_at_a_random_write_then_rerun_equals_a_clean_run(
    clean: dict[str, Any], api_url: str, tmp_path: Path
) -> None:
    seed = 20261126
    rng = random.Random(seed)  # a fixed draw: a failure names the same point again
    home = copy_home(clean["curated_home"], tmp_path / "home")
    train = ("train", "--max-steps", "1")
    point = f"store.put#{rng.randint(1, 12)}"

    killed = flywheel(*train, home=home, api_url=api_url, FLYWHEEL_TEST_KILL_AT=point)
    assert killed.returncode in (KILLED, 0), killed.stderr  # 0: the run wrote fewer objects
    assert flywheel(*train, home=home, api_url=api_url).returncode == 0
    assert contents(home) == clean["trained"], point
