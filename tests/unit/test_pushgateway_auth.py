"""The Pushgateway takes pushes with basic auth only (compose): a stage pushes with the
credentials in FLYWHEEL_PUSHGATEWAY_URL as an Authorization header, a push without them is
refused and counted, and the password never reaches a log line."""

from __future__ import annotations

import base64
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from infra.metrics.stage import StageReport, publish
from infra.store import LocalStore

PASSWORD = "pg-s3cret-7f1e"


@pytest.fixture
def pushgateway() -> Iterator[tuple[str, list[str]]]:
    """A Pushgateway stand-in behind basic auth (flywheel / PASSWORD): its URL, the paths
    it accepted."""
    accepted: list[str] = []
    good = "Basic " + base64.b64encode(f"flywheel:{PASSWORD}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.headers.get("authorization") != good:
                self.send_response(401)
            else:
                accepted.append(self.path)
                self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}", accepted
    server.shutdown()


def test_a_push_carries_the_urls_credentials_and_never_logs_them(
    tmp_path: Path, pushgateway: tuple[str, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    where, accepted = pushgateway
    store = LocalStore(tmp_path)
    with caplog.at_level(logging.WARNING):
        publish(
            StageReport("collect"),
            store=store,
            status="success",
            duration_s=1.0,
            pushgateway_url=f"http://flywheel:{PASSWORD}@{where}",
        )
        refused = publish(
            StageReport("collect"),
            store=store,
            status="success",
            duration_s=1.0,
            pushgateway_url=f"http://flywheel:wrong-{PASSWORD}@{where}",
        )
    assert accepted == ["/metrics/job/flywheel/stage/collect"]
    assert refused["counters"]["flywheel_metrics_push_failures_total"]
    assert PASSWORD not in caplog.text and where in caplog.text
