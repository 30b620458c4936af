"""What an upstream's error status becomes: a refusal of the request (400, 413, 422) with the
server's own message, never its address or key; the server's own trouble (401, 403, 404,
429, 5xx) stays a failure of the version."""

from __future__ import annotations

import orjson
import pytest

from infra.errors import UpstreamError
from infra.upstream.statuses import (
    UpstreamRefused,
    UpstreamUnavailable,
    refusal_message,
    status_error,
)


@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_refusal_of_the_request_carries_its_status_and_message(status: int) -> None:
    body = orjson.dumps({"error": {"message": "'stop' must hold strings", "code": status}})
    error = status_error("v1", status, [], body)
    assert isinstance(error, UpstreamRefused)
    assert (error.status, error.message) == (status, "'stop' must hold strings")
    assert str(error) == f"v1: HTTP {status}"  # the operator's log names the version


@pytest.mark.parametrize("status", [401, 403, 404])
def test_the_servers_own_4xx_is_the_versions_failure(status: int) -> None:
    # 404: vLLM's answer for an adapter that is not loaded; 401/403: the gateway's key
    error = status_error("v1", status, [], b'{"error": {"message": "The model v1 does not exist"}}')
    assert isinstance(error, UpstreamError) and not isinstance(error, UpstreamRefused)
    assert not isinstance(error, UpstreamUnavailable)


@pytest.mark.parametrize("status", [408, 429, 500, 503])
def test_capacity_and_server_errors_may_be_retried(status: int) -> None:
    error = status_error("v1", status, [(b"retry-after", b"3")])
    assert isinstance(error, UpstreamUnavailable) and error.retry_after_s == 3.0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"object": "error", "message": "too long", "code": 400}', "too long"),  # older vLLM
        (b'{"error": "too long"}', "too long"),
        (b'{"detail": "too long"}', "too long"),
        (b'{"detail": [{"loc": ["body", "stop"]}]}', '[{"loc":["body","stop"]}]'),
        (b"<html>Bad Request</html>", "the model server refused the request (HTTP 400)"),
        (b"", "the model server refused the request (HTTP 400)"),
    ],
)
def test_the_message_is_read_from_the_usual_error_shapes(body: bytes, message: str) -> None:
    assert refusal_message(body, 400) == message


def test_the_message_never_shows_the_servers_address_or_key() -> None:
    body = orjson.dumps(
        {"error": {"message": "bad stop at http://10.0.0.7:8000/v1 (key sk-secret-1)\nline"}}
    )
    hide = ("http://10.0.0.7:8000/v1", "http://10.0.0.7:8000", "10.0.0.7:8000", "10.0.0.7")
    message = refusal_message(body, 400, (*hide, "sk-secret-1"))
    assert message == "bad stop at [upstream] (key [upstream]) line"
    assert len(refusal_message(orjson.dumps({"message": "x" * 5000}), 400)) == 1000
