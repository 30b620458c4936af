"""The Iceberg warehouse on S3 (moto on loopback) behind a failing proxy: a request that fails a
few times is retried by pyarrow's S3 client and the commit goes through without being redone; a
request that keeps failing is tried ``WAREHOUSE_RETRIES + 1`` times in all and the commit is not
redone around it (retries at one level: it used to be tried 3 times in the client, in each of 6
commit attempts, in each of 4 task attempts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infra.catalog import WAREHOUSE_RETRIES, append_rows, get_table, open_catalog
from infra.errors import TransientError
from infra.retries import RETRIES, STORE_RETRIES, gave_up
from infra.settings import Settings, get_settings
from tests.fakes.faults import Aim, fault_proxy
from tests.procs import s3_server

pytestmark = [pytest.mark.integration, pytest.mark.waits]
BUCKET = "flywheel-warehouse-faults"


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    with s3_server(BUCKET) as endpoint:
        yield endpoint


def _settings(home: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings of a flywheel process on this S3 server, from its environment as in
    production (the table lease reads them there too)."""
    env = {
        "FLYWHEEL_HOME": str(home),
        "FLYWHEEL_STORE_URL": f"s3://{BUCKET}/{home.name}",
        "FLYWHEEL_S3_ENDPOINT_URL": endpoint,
        "FLYWHEEL_S3_ACCESS_KEY_ID": "testing",
        "FLYWHEEL_S3_SECRET_ACCESS_KEY": "testing",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    get_settings.cache_clear()
    return get_settings()


def _row(i: int) -> dict[str, object]:
    from datetime import UTC, datetime

    return {
        "trace_id": f"t-{i}",
        "prompt_group": "g",
        "question": "q",
        "answer": "a",
        "contexts": [],
        "pii_entities": [],
        "eligible_as": "train",
        "window": "2026-12-03T00:00:00Z",
        "created_at": datetime(2026, 12, 3, tzinfo=UTC),
    }


def test_a_few_failed_requests_are_retried_by_the_client_alone(
    s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    faults = {
        "kinds": ("before", "reset"),
        "max_faults": 4,
        "aim": Aim(paths="/warehouse/flywheel/"),
    }
    with fault_proxy(s3, rate=1.0, seed=1, **faults) as proxy:
        proxy.enabled = False
        catalog = open_catalog(_settings(tmp_path / "few", proxy.url, monkeypatch))
        get_table(catalog, "training_examples")
        commits = RETRIES.snapshot().get("catalog.commit", 0)
        proxy.enabled = True
        append_rows(catalog, "training_examples", [_row(1)])
        proxy.enabled = False
        assert sum(proxy.faults.values()) == 4
        assert get_table(catalog, "training_examples").scan().to_arrow().num_rows == 1
    assert RETRIES.snapshot().get("catalog.commit", 0) == commits  # the commit was not redone


@pytest.mark.parametrize(
    ("aimed", "attempts"),
    [
        ("/warehouse/flywheel/", WAREHOUSE_RETRIES + 1),  # a table's file: pyarrow's client
        ("/_locks/", STORE_RETRIES.attempts),  # the commit's table lease: the store's budget
    ],
    ids=["warehouse-file", "table-lease"],
)
def test_a_request_in_a_commit_that_keeps_failing_is_tried_at_one_level(
    s3: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, aimed: str, attempts: int
) -> None:
    """The request's own budget is all the commit gets: the commit is not redone around it, and
    the error is marked so the task around it does not try it again either."""
    with fault_proxy(s3, rate=1.0, seed=2, kinds=("before",), aim=Aim(paths=aimed)) as proxy:
        proxy.enabled = False
        catalog = open_catalog(_settings(tmp_path / "down", proxy.url, monkeypatch))
        get_table(catalog, "training_examples")
        commits = RETRIES.snapshot().get("catalog.commit", 0)
        proxy.enabled = True
        with pytest.raises(TransientError) as err:
            append_rows(catalog, "training_examples", [_row(1)])
        proxy.enabled = False
    assert proxy.faults["before"] == attempts
    assert gave_up(err.value)
    assert RETRIES.snapshot().get("catalog.commit", 0) == commits


def test_the_budgets_are_the_ones_the_runbook_states() -> None:
    assert (WAREHOUSE_RETRIES + 1, STORE_RETRIES.attempts) == (10, 7)
