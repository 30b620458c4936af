"""The release alerts on a whole simulated release (tests/benchmarks/alert_sim.py: Poisson
requests, 1,000 identified users with Zipf activity, the shadow phase and the canary steps,
every series the gateway exports, evaluated by ``promtool test rules`` every 15 s): an
identical candidate is not rolled back, a gross regression is. The seeds are releases the
rules before issue 51 rolled back (raw events over sliding windows); ``make bench``-style
rates: ``python -m tests.benchmarks.alert_sim``."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.benchmarks.alert_sim import AA, RULES, Population, first_fired, simulate
from tests.unit.test_monitoring_config import tool

# identical versions at 2 req/s that the old rules rolled back: errors (seeds 1, 4, 8, 9) and
# latency (7)
QUIET_FALSE_ALARMS = (1, 4, 7, 8, 9)
# identical versions at 10 req/s whose heaviest user votes every answer down, on both: the
# old feedback rule rolled these back
HEAVY_DOWNVOTER_FALSE_ALARMS = (3, 14, 19)


@pytest.fixture(autouse=True)
def _promtool() -> None:
    tool("promtool")  # skips where promtool is missing, as the other alert tests do


def fired(pop: Population, seeds: tuple[int, ...]) -> dict[tuple[str, str], float]:
    releases = [simulate(pop, seed=s, workload=f"r{s}", zero_init=True) for s in seeds]
    return first_fired(releases, RULES)


def test_an_identical_candidate_at_2_req_s_is_not_rolled_back() -> None:
    assert fired(AA, QUIET_FALSE_ALARMS) == {}


def test_the_heaviest_client_voting_everything_down_cannot_roll_back_an_identical_candidate() -> (
    None
):
    heavy = replace(AA, rate=10, heavy_downvoter=True)
    assert fired(heavy, HEAVY_DOWNVOTER_FALSE_ALARMS) == {}


def test_a_gross_regression_is_still_rolled_back_within_minutes() -> None:
    broken = fired(replace(AA, error_factor=50), (1, 4))  # every request fails
    disliked = fired(replace(AA, rate=10, down_shift=0.8), (3,))  # every vote is thumbs-down
    assert set(broken) == {("CandidateModelRegression", "r1"), ("CandidateModelRegression", "r4")}
    assert max(broken.values()) <= 600  # within the shadow phase and the first canary step
    assert set(disliked) == {("CandidateNegativeFeedback", "r3")}
