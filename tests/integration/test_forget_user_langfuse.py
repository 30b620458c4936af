"""``flywheel forget-user USER`` against Langfuse as it is (issue 29, item 0), run as an operator
runs it: on a v4 server in its default ``events_only`` mode (the deprecated trace and score
lists answer 404) and on a v3 (``legacy``) server, both rate-limiting reads with 429 and
``Retry-After``, paging at most 100 items, and queueing deletes, every trace of the user is
deleted (their scores with them), the command says how many deletes a read-back confirmed and
how many are still queued, and the next run's re-check confirms the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from infra.settings import LangfuseSettings, Settings
from tests.fakes.langfuse import FakeLangfuseServer, FakeScore

pytestmark = [pytest.mark.integration, pytest.mark.waits]  # mostly waits on the clock
ROOT = Path(__file__).resolve().parents[2]
NOW = datetime.now(UTC).replace(microsecond=0)
# the rate-limited read resource and its budget per second (v1 reads back trace by trace)
READS = {"events_only": ("public-api", 3), "legacy": ("public-api-legacy", 40)}


@pytest.fixture(scope="module")
def api_url(prefect_api: None) -> Iterator[str]:
    """The session's Prefect API, handed to the CLI process."""
    from prefect.settings import PREFECT_API_URL

    yield str(PREFECT_API_URL.value())


def flywheel(*args: str, home: Path, fake: FakeLangfuseServer, api_url: str) -> dict:
    """Run the CLI in a fresh FLYWHEEL_HOME with Langfuse as the trace source; its JSON."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("FLYWHEEL_", "PREFECT_"))}
    env = {
        **clean,
        "PYTHONPATH": str(ROOT),
        "FLYWHEEL_HOME": str(home / "fw"),
        "PREFECT_API_URL": api_url,
        "FLYWHEEL_TRACE_SOURCE": "langfuse",
        "FLYWHEEL_LANGFUSE__HOST": fake.url,
        "FLYWHEEL_LANGFUSE__PUBLIC_KEY": fake.public_key,
        "FLYWHEEL_LANGFUSE__SECRET_KEY": fake.secret_key,
    }
    done = subprocess.run(
        [sys.executable, "-m", "deployments.cli", *args, "--json"],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def seed(fake: FakeLangfuseServer) -> dict[str, set[str]]:
    """240 traces of alice among 30 of bob, each with feedback and judge scores."""
    traces = fake.seed(270, start=NOW - timedelta(days=2), spacing=timedelta(minutes=3))
    users: dict[str, set[str]] = {"alice": set(), "bob": set()}
    for i, trace in enumerate(traces):
        trace.user_id = "bob" if i % 9 == 4 else "alice"
        users[trace.user_id].add(trace.id)
        fake.add_score(FakeScore(f"{trace.id}-j2", trace.id, 0.7, trace.timestamp, name="judge2"))
    return users


@pytest.mark.slow  # a CLI process and a flow run, with 1 s rate-limit windows waited out
@pytest.mark.parametrize("mode", ["events_only", "legacy"])
def test_forget_user_deletes_every_trace_and_says_which_deletes_are_confirmed(
    mode: str, tmp_path: Path, api_url: str
) -> None:
    with FakeLangfuseServer(mode=mode) as fake:
        users = seed(fake)
        assert len(users["alice"]) == 240
        resource, points = READS[mode]
        budget = fake.rate_limit(resource, points, window_s=1)
        fake.deletes.visible_after_reads = 1  # the worker deletes after the next read

        out = flywheel("forget-user", "alice", home=tmp_path, fake=fake, api_url=api_url)

        assert out["found"] is True and out["langfuse_traces_deleted"] == 240
        confirmed, pending = out["langfuse_traces_confirmed"], out["langfuse_traces_pending"]
        assert confirmed + pending == 240 and confirmed > 0 and pending > 0
        assert out["langfuse_traces_deferred"] == 0
        assert set(fake.traces) == users["bob"]  # every trace of alice, none of bob's
        assert {s.trace_id for s in fake.scores} == users["bob"]  # scores went with them
        # scores are never listed nor deleted one by one; a read-back asks for a trace's
        assert not [p for p, c in fake.requests if "scores" in p and "traceId" not in c]
        assert budget.throttled > 0 and budget.ignored == 0  # Retry-After honoured
        pages = [c for path, c in fake.requests if "limit" in c]
        assert pages and max(int(c["limit"][0]) for c in pages) <= 100
        assert all(len(b) <= 1000 for b in fake.delete_batches)

        # the next retention run re-checks the pending deletes: all gone now
        from tasks.governance.langfuse import langfuse_recheck

        keys = {"public_key": fake.public_key, "secret_key": fake.secret_key}
        settings = Settings(langfuse=LangfuseSettings(host=fake.url, **keys))
        later = langfuse_recheck(settings, users["alice"])
        assert set(later.confirmed) == users["alice"] and later.pending == []
