"""One user, one voice (``infra.gateway.voices``): what the canary's error and feedback tests
read. A user's many requests count once per step, a new step hears everyone again, a request
without a user or peer is never a voice, and a full ledger says how many it could not count."""

from __future__ import annotations

from infra.gateway.chat_request import ChatRequest
from infra.gateway.metrics import GatewayMetrics
from infra.gateway.requester import request_key
from infra.upstream.completion import GenParams


def sample(m: GatewayMetrics, name: str, **labels: str) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


def test_a_user_is_one_voice_per_step_however_often_it_asks_or_fails() -> None:
    m = GatewayMetrics()
    ledger = m.ledger
    heavy, quiet = ledger.voter("u\x00heavy"), ledger.voter("u\x00quiet")
    for _ in range(50):  # one client retrying a failing request
        m.observe(model="v1", route="canary", seconds=0.1, error=True, voter=heavy, epoch=(1,))
    m.observe(model="v1", route="canary", seconds=0.1, error=False, voter=quiet, epoch=(1,))
    labels = {"model": "v1", "route": "canary", "workload": "default"}
    assert sample(m, "agent_requests_total", **labels) == 51  # every event, for dashboards
    assert sample(m, "agent_errors_total", **labels) == 50
    assert sample(m, "agent_voices_total", **labels) == 2  # two users
    assert sample(m, "agent_error_voices_total", **labels) == 1  # one of them met an error
    # the routing state moved the line on: the next step hears the heavy user again, once
    for _ in range(5):
        m.observe(model="v1", route="canary", seconds=0.1, error=True, voter=heavy, epoch=(2,))
    assert sample(m, "agent_error_voices_total", **labels) == 2


def test_the_same_user_behind_another_connection_is_still_one_voice() -> None:
    ledger = GatewayMetrics().ledger

    def voter(user: str | None, session: str | None, client: str | None) -> int | None:
        req = ChatRequest(model="flywheel", messages=[], stream=False, params=GenParams())
        req.user_id, req.session_id, req.client = user, session, client
        return ledger.voter(request_key(req))

    assert voter("u-1", None, "10.0.0.1") == voter("u-1", "s-9", "10.0.0.2")
    assert voter(None, "s-1", "10.0.0.1") == voter(None, "s-1", "10.0.0.2")  # a session
    assert voter(None, None, "10.0.0.1") != voter(None, None, "10.0.0.2")
    assert voter("10.0.0.1", None, None) != voter(None, None, "10.0.0.1")  # a user is no address
    assert voter(None, None, None) is None


def test_no_voter_is_never_a_voice_and_a_full_ledger_counts_what_it_dropped() -> None:
    m = GatewayMetrics()
    m.ledger.max_keys = 3
    m.observe(model="v1", route="canary", seconds=0.1, error=False, voter=None, epoch=(1,))
    for user in ("a", "b", "c", "d", "e"):
        voter = m.ledger.voter(f"u\x00{user}")
        m.observe(model="v1", route="canary", seconds=0.1, error=False, voter=voter, epoch=(1,))
    labels = {"model": "v1", "route": "canary", "workload": "default"}
    assert sample(m, "agent_voices_total", **labels) == 3
    assert sample(m, "flywheel_voices_dropped_total") == 2
    assert m.ledger.dropped == 2


def test_a_user_is_slower_than_each_bound_once_per_step() -> None:
    """``agent_slow_voices_total``: the p99 rail's unit. A user with fifty slow requests is one
    user over each bound they passed; a slower request adds only the bounds it newly passes;
    the next step hears them again; a user the ledger did not count as served has none."""
    m = GatewayMetrics()
    slow, quick = m.ledger.voter("u\x00slow"), m.ledger.voter("u\x00quick")

    def over(bound: str) -> float:
        return sample(m, "agent_slow_voices_total", over=bound, **labels)

    labels = {"model": "v1", "route": "canary", "workload": "default"}
    for _ in range(50):
        m.observe(model="v1", route="canary", seconds=0.7, error=False, voter=slow, epoch=(1,))
    m.observe(model="v1", route="canary", seconds=0.12, error=False, voter=quick, epoch=(1,))
    assert (over("0.1"), over("0.6"), over("0.75")) == (2, 1, 0)
    assert over("0.6") == 1  # one user, not fifty requests
    m.observe(model="v1", route="canary", seconds=1.1, error=False, voter=slow, epoch=(1,))
    assert (over("0.6"), over("0.75"), over("1.0"), over("1.25")) == (1, 1, 1, 0)
    m.observe(model="v1", route="canary", seconds=0.7, error=False, voter=slow, epoch=(2,))
    assert over("0.6") == 2  # the next step
    m.ledger.max_keys = 0  # a full ledger: no voice, no slow voice
    m.observe(model="v1", route="canary", seconds=9.0, error=False, voter=quick, epoch=(3,))
    assert over("7.5") == 0
