"""What an operator sees while waiting (progress lines or a bar) and after reading an empty
window (where the traffic is), and the one-line messages of bad settings and unreachable
services (they name the variable or the host)."""

from __future__ import annotations

import io
import re
import socket
from datetime import UTC, datetime

import pytest

from deployments.hints import empty_window_note
from deployments.output import render
from deployments.progress import showing_progress
from infra.progress import report_progress
from infra.settings import check_store_url
from infra.store import LocalStore

STAMPED = re.compile(r"^\d{2}:\d{2}:\d{2} ")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_output_gets_one_timestamped_line_per_step() -> None:
    from tasks.demo.loop import Steps

    out = io.StringIO()
    with showing_progress(out):
        steps = Steps(total=6)
        steps.start("bootstrap the base model v0")
        for done in range(0, 900, 5):
            report_progress("bootstrap", "pre-train", done=done, total=900)
        steps.start("start the gateway on loopback")
        steps.finish()

    lines = out.getvalue().splitlines()
    assert all(STAMPED.match(line) for line in lines), lines
    assert [line[9:] for line in lines] == [
        "run [0/6] bootstrap the base model v0",
        "bootstrap [0/900] pre-train",
        "run [1/6] start the gateway on loopback",
        "run [6/6] done",
    ]
    assert "\r" not in out.getvalue()


def test_a_terminal_gets_a_bar_that_moves_within_a_step() -> None:
    term = FakeTerminal()
    with showing_progress(term):
        report_progress("bootstrap", "pre-train", done=0, total=100)
        report_progress("bootstrap", "pre-train", done=50, total=100)

    shown = term.getvalue()
    bars = re.findall(r"\r\x1b\[K(bootstrap \[[#-]+\] \d+/100)", shown)
    assert bars == [
        "bootstrap [------------------------] 0/100",
        "bootstrap [############------------] 50/100",
    ]
    assert shown.endswith("\r\x1b[K")  # the bar is cleared when the command ends


def test_nobody_watching_costs_nothing_and_prints_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report_progress("run", "train", done=3, total=6)
    assert capsys.readouterr() == ("", "")


def test_summaries_align_their_values() -> None:
    text = render("collect", {"window": "2026-11-22T10:00:00Z", "opted_out": 0, "note": None})
    assert text.splitlines() == [
        "collect",
        "  window     2026-11-22T10:00:00Z",
        "  opted out  0",
        "  note       -",
    ]


def _spool_line(store: LocalStore, hour: datetime) -> None:
    store.put(f"traces/dt={hour:%Y-%m-%d}/hour={hour:%H}/w-0.jsonl", b"{}\n")


def test_an_empty_collect_window_points_at_the_newest_traffic(tmp_path) -> None:
    store = LocalStore(tmp_path)
    window = "2026-11-23T13:00:00Z"
    assert "no traffic anywhere yet" in empty_window_note(
        store, stage="collect", window=window, source="spool"
    )
    _spool_line(store, datetime(2026, 11, 23, 9, tzinfo=UTC))
    _spool_line(store, datetime(2026, 11, 23, 14, tzinfo=UTC))

    note = empty_window_note(store, stage="collect", window=window, source="spool")

    assert note == (
        "nothing read: the newest traffic is in 2026-11-23T14:00:00Z: "
        "pass --window-start 2026-11-23T14:00:00Z"
    )
    store.put("rollouts/window=2026-11-23T14:00:00Z/batch.parquet", b"x")
    store.put("scores/cache/judge/0.parquet", b"x")
    assert "--window-start 2026-11-23T14:00:00Z" in empty_window_note(
        store, stage="score", window=window, source="spool"
    )
    assert "no scores anywhere yet (run score first)" in empty_window_note(
        store, stage="curate", window=window, source="spool"
    )


@pytest.mark.parametrize("url", ["::bad::", "", "s3://", "s3://Bad_Bucket/x", "http://h/x"])
def test_a_store_url_must_be_a_path_file_or_s3(url: str) -> None:
    with pytest.raises(ValueError, match="expected a directory path, file:///path or s3://"):
        check_store_url(url)


@pytest.mark.parametrize("url", ["/data/store", "rel/store", "file:///data", "s3://b-1/p/q"])
def test_good_store_urls_pass(url: str) -> None:
    assert check_store_url(url) == url


def test_settings_errors_name_the_variable_and_hide_secrets(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    from infra.errors import ConfigError
    from infra.settings import get_settings

    monkeypatch.chdir(tmp_path)
    cases = {
        "FLYWHEEL_GATEWAY__UPSTREAMS": ("v1=http://x", "a mapping setting is written as JSON"),
        "FLYWHEEL_RELEASE__CANARY_STEPS": ("5,25", "a list setting is written as JSON"),
        "FLYWHEEL_CATALOG_TYPE": ("glue", "Input should be 'sql' or 'rest' (got 'glue')"),
        "FLYWHEEL_RAW_RETENTION_DAYS": ("-2", "greater than or equal to 1 (got '-2')"),
    }
    for name, (value, says) in cases.items():
        monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        with pytest.raises(ConfigError) as err:
            get_settings()
        assert str(err.value).startswith(f"{name}: ") and says in str(err.value)
        assert "\n" not in str(err.value)
        monkeypatch.delenv(name)
    monkeypatch.setenv("FLYWHEEL_GATEWAY__ADMIN_TOKEN", "x" * 40)
    monkeypatch.setenv("FLYWHEEL_JUDGE__API_KEY", "[not-json")  # a plain secret: fine
    get_settings.cache_clear()
    assert get_settings().judge.api_key is not None
    get_settings.cache_clear()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_langfuse_is_named_by_host() -> None:
    from infra.errors import TransientSourceError
    from infra.traces.langfuse_reader import LangfuseSource

    host = f"http://127.0.0.1:{_closed_port()}"
    src = LangfuseSource(host=host, public_key="pk", secret_key="sk", page_retries=0)
    start = datetime(2026, 11, 22, 10, tzinfo=UTC)
    with src, pytest.raises(TransientSourceError) as err:
        src.read_window(start, start.replace(hour=11))
    assert f"Langfuse at {host}" in str(err.value) and "cannot reach" in str(err.value)


def test_an_unreachable_s3_endpoint_is_named() -> None:
    from botocore.exceptions import EndpointConnectionError

    from infra.errors import TransientStoreError
    from infra.store import S3Store

    endpoint = f"http://127.0.0.1:{_closed_port()}"
    store = S3Store(
        "s3://bucket/p", endpoint_url=endpoint, access_key_id="a", secret_access_key="b"
    )
    err = store._translate(EndpointConnectionError(endpoint_url=endpoint), "put x")
    assert isinstance(err, TransientStoreError)
    assert f"cannot reach the S3 endpoint {endpoint}" in str(err)
