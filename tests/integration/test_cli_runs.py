"""The CLI around real flow runs, as an operator runs it (``python -m deployments.cli`` in a
fresh FLYWHEEL_HOME): a failure inside a flow is one line, not Prefect's log and traceback; the
local Prefect API's start is announced; an empty window says where the traffic is;
``forget-user`` with an unknown id erases nothing and says so."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import make_trace

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def api_url(prefect_api: None) -> Iterator[str]:
    """The session's Prefect API, handed to the CLI processes (no API start per test)."""
    from prefect.settings import PREFECT_API_URL

    yield str(PREFECT_API_URL.value())


def flywheel(*args: str, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLYWHEEL_", "PREFECT_"))}
    return subprocess.run(
        [sys.executable, "-m", "deployments.cli", *args],
        cwd=home,
        env={**clean, "PYTHONPATH": str(ROOT), "FLYWHEEL_HOME": str(home / "fw"), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow  # starts its own local Prefect API, as a first command does
def test_a_failure_inside_a_flow_is_one_line_after_the_api_start_line(tmp_path: Path) -> None:
    catalog = f"http://127.0.0.1:{_closed_port()}"

    done = flywheel(
        "collect", home=tmp_path, FLYWHEEL_CATALOG_TYPE="rest", FLYWHEEL_CATALOG_URI=catalog
    )

    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "ERROR" not in done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith("flywheel collect: starting the local Prefect API")
    assert lines[1].startswith("flywheel collect: local Prefect API ready at http://127.0.0.1:")
    assert len(lines) == 3, done.stderr
    assert lines[2].startswith(
        f"flywheel collect: error: cannot open the rest catalog at {catalog}"
    )


def test_an_unreachable_prefect_api_is_named(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/api"

    done = flywheel("collect", home=tmp_path, PREFECT_API_URL=url)

    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"flywheel collect: error: the Prefect API at {url} (PREFECT_API_URL) does not answer: "
        "ConnectError"
    ]


def test_collect_of_an_empty_window_says_where_the_traffic_is(api_url: str, tmp_path: Path) -> None:
    from infra.settings import Settings
    from infra.store import open_store
    from infra.traces import SpoolWriter

    # traffic hours before the last closed hour (never the default window, even if the
    # clock passes an hour during the test)
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    writer = SpoolWriter(open_store(Settings(home=tmp_path / "fw")), writer_id="sim")
    writer.write_trace(make_trace(1, hour))
    writer.flush()
    traffic = hour.strftime("%Y-%m-%dT%H:00:00Z")

    done = flywheel("collect", "--json", home=tmp_path, PREFECT_API_URL=api_url)

    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["read"] == 0 and summary["window"] > traffic  # the last closed hour
    assert summary["note"] == (
        f"nothing read: the newest traffic is in {traffic}: pass --window-start {traffic}"
    )

    again = flywheel("collect", "--window-start", traffic, home=tmp_path, PREFECT_API_URL=api_url)
    assert again.returncode == 0, again.stderr
    assert "  read         1" in again.stdout.splitlines()


def test_forget_user_with_an_unknown_id_erases_nothing_and_exits_2(
    api_url: str, tmp_path: Path
) -> None:
    from infra.catalog import append_rows, get_table, open_catalog
    from infra.settings import Settings

    settings = Settings(home=tmp_path / "fw")
    catalog = open_catalog(settings)
    for key in ("a" * 64, "b" * 64):  # two snapshots that an erasure would expire
        now = datetime.now(UTC)
        append_rows(
            catalog, "consent", [{"user_key": key, "consent_to_training": True, "updated_at": now}]
        )
    assert len(get_table(catalog, "consent").metadata.snapshots) == 2

    done = flywheel(
        "forget-user", "nobody-of-that-name", "--json", home=tmp_path, PREFECT_API_URL=api_url
    )

    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("flywheel forget-user: error: no data found for this user id")
    result = json.loads(done.stdout)
    assert result["found"] is False and result["snapshots_expired"] == 0
    assert result["objects_rewritten"] == result["objects_deleted"] == 0
    catalog = open_catalog(settings)
    assert len(get_table(catalog, "consent").metadata.snapshots) == 2
