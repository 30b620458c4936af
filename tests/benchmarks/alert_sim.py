"""How often the release alert rules fire: on identical versions (a false rollback) and on
known-bad candidates (detection), evaluated by ``promtool test rules`` every 15 s over the
series a gateway exports during a whole release.

A release is a 10-minute warm-up on stable, then the shadow phase and the canary steps
(5, 25, 50 and 90 % of users), 5 minutes each. Requests arrive as a Poisson process; each
belongs to one of 1,000 identified users with Zipf activity, routed by a sticky bucket per
user; errors, latency (a per-user scale times a per-request log-normal) and votes are drawn per
request; the voice series count each user once per route (errors: once per route, votes: once
per model) per step, as :mod:`infra.gateway.voices` does. Many releases are planted in one
promtool run, each under a workload of its own (the rules compare each workload with itself),
and the first time each alert fires is read from ``ALERTS``.

Not a CI test (``tests/unit/test_monitoring_alert_sim.py`` runs a few seeds):

    PYTHONPATH=. .venv/bin/python -m tests.benchmarks.alert_sim --releases 200

prints, per population, the share of releases each alert fired in under the rules as they were
(``--before-rev``, candidate series created on first increment) and as they are (zero-initialised).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from infra.gateway.metrics import LATENCY_BUCKETS

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "infra/prometheus/rules.yml"
TICK_S, WARMUP_S, STEP_S = 15, 600, 300
SCHEDULE = (0.0, 5.0, 25.0, 50.0, 90.0)  # the shadow phase (weight 0), then the canary steps
SHADOW_FRACTION = 0.2
END_S = WARMUP_S + STEP_S * len(SCHEDULE)
ALERTS = ("CandidateModelRegression", "CandidateLatencyRegression", "CandidateNegativeFeedback")
ROUTES = (("v0", "stable"), ("v1", "canary"), ("v1", "shadow"))
PER_RUN = 100  # releases per promtool run (more, at 10 req/s, pass its query sample limit)


@dataclass(frozen=True)
class Population:
    """Traffic of one release and how the candidate differs (factors 1 and shift 0: identical)."""

    rate: float = 2.0  # requests per second, both versions together
    users: int = 1000
    zipf: float = 1.1
    error: float = 0.02
    error_factor: float = 1.0  # the candidate's error probability is error * error_factor
    latency_factor: float = 1.0
    vote: float = 0.1  # the chance a user votes on an answer
    down: float = 0.2  # the chance a vote is thumbs-down
    down_shift: float = 0.0  # added to the candidate's thumbs-down chance
    heavy_downvoter: bool = False  # the heaviest user votes every answer down, on both versions


@dataclass
class Release:
    """One release's series: name (with labels) -> cumulative value per tick (NaN: absent)."""

    workload: str
    series: dict[str, np.ndarray] = field(default_factory=dict)


def _counts(times: np.ndarray, ticks: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.sort(times), ticks, side="right").astype(float)


def _first(keys: np.ndarray) -> np.ndarray:
    """Indices of each key's first occurrence (events are in time order)."""
    return np.unique(keys, return_index=True)[1]


@dataclass
class Traffic:
    """One release's requests, in time order: when, whose, where routed and what happened."""

    t: np.ndarray
    user: np.ndarray
    step: np.ndarray  # 0: the warm-up, 1: the shadow phase, 2-5: the canary steps
    cand: np.ndarray  # answered by the candidate (the canary route)
    shadow: np.ndarray  # also copied to the candidate (the shadow route)
    error: np.ndarray
    shadow_error: np.ndarray
    latency: np.ndarray
    votes: np.ndarray
    down: np.ndarray


def draw(pop: Population, rng: np.random.Generator) -> Traffic:
    """The requests of one release of ``pop``."""
    n = rng.poisson(pop.rate * END_S)
    t = np.sort(rng.uniform(0, END_S, n))
    weights = 1.0 / np.arange(1, pop.users + 1) ** pop.zipf
    user = rng.choice(pop.users, size=n, p=weights / weights.sum())
    bucket, scale = rng.uniform(0, 100, pop.users), np.exp(rng.normal(0, 0.3, pop.users))
    step = np.where(t < WARMUP_S, 0, 1 + ((t - WARMUP_S) // STEP_S).astype(int))
    weight = np.array([0.0, *SCHEDULE])[np.minimum(step, len(SCHEDULE))]
    cand = bucket[user] < weight  # sticky: raising the weight only adds users
    shadow = (step == 1) & (rng.uniform(size=n) < SHADOW_FRACTION)
    err_c = min(1.0, pop.error * pop.error_factor)
    error = rng.uniform(size=n) < np.where(cand, err_c, pop.error)
    shadow_error = rng.uniform(size=n) < err_c
    latency = 0.3 * scale[user] * np.exp(rng.normal(0, 0.5, n))
    latency *= np.where(cand, pop.latency_factor, 1.0)
    votes = rng.uniform(size=n) < pop.vote
    down = rng.uniform(size=n) < np.clip(pop.down + np.where(cand, pop.down_shift, 0), 0, 1)
    if pop.heavy_downvoter:
        votes |= user == 0
        down |= user == 0
    return Traffic(t, user, step, cand, shadow, error, shadow_error, latency, votes, down)


def simulate(pop: Population, *, seed: int, workload: str, zero_init: bool) -> Release:
    """The series one release of ``pop`` produces (``zero_init``: the candidate's series exist
    at 0 from the release's start; else from its first event, as before the gateway did it)."""
    tr = draw(pop, np.random.default_rng(seed))
    ticks = np.arange(0, END_S + 1, TICK_S, dtype=float)
    rel = Release(workload)

    def put(name: str, times: np.ndarray, model: str, **labels: str) -> None:
        values = _counts(times, ticks)
        if model == "v1":  # the candidate's series: absent before it exists
            born = WARMUP_S if zero_init else (times.min() if len(times) else np.inf)
            values[ticks < born] = np.nan
        # as Prometheus scrapes the gateway: its job (the rules read no other's series)
        inner = ",".join(
            f'{k}="{v}"' for k, v in {"job": "gateway", "model": model, **labels}.items()
        )
        rel.series[f'{name}{{{inner},workload="{workload}"}}'] = values

    t, who = tr.t, tr.step * pop.users + tr.user  # a voter in a step
    for route_id, (model, route) in enumerate(ROUTES):
        on = {"stable": ~tr.cand, "canary": tr.cand, "shadow": tr.shadow}[route]
        err = (tr.shadow_error if route == "shadow" else tr.error) & on
        keys = who * len(ROUTES) + route_id
        put("agent_requests_total", t[on], model, route=route)
        put("agent_errors_total", t[err], model, route=route)
        put("agent_voices_total", t[on][_first(keys[on])], model, route=route)
        put("agent_error_voices_total", t[err][_first(keys[err])], model, route=route)
        if route == "shadow":
            continue
        for le in (*LATENCY_BUCKETS, float("inf")):
            le_s = "+Inf" if le == float("inf") else repr(le)
            slow_enough = t[on & (tr.latency <= le)]
            put("agent_latency_seconds_bucket", slow_enough, model, route=route, le=le_s)
        voted = on & tr.votes
        first_vote = np.zeros(len(t), dtype=bool)  # each voter's first vote in a step
        first_vote[np.flatnonzero(voted)[_first(who[voted])]] = True
        for value, sel in (("-1", tr.down), ("1", ~tr.down)):
            put("user_feedback_total", t[voted & sel], model, value=value)
            put("user_feedback_voices_total", t[first_vote & sel], model, value=value)
    return rel


def _values(v: np.ndarray) -> str:
    return " ".join("_" if np.isnan(x) else str(int(x)) for x in v)


def first_fired(releases: list[Release], rules: Path) -> dict[tuple[str, str], float]:
    """(alert, workload) -> seconds after the release start at which that alert first fired,
    evaluated by ``promtool test rules`` every 15 s up to the release's end."""
    query = (
        'min by (alertname, workload) (min_over_time(timestamp(ALERTS{alertstate="firing",'
        f'alertname=~"Candidate.*"}})[{END_S}s:{TICK_S}s])) - {WARMUP_S}'
    )
    with tempfile.TemporaryDirectory() as tmp:
        lines = [
            f"rule_files: [{rules}]",
            f"evaluation_interval: {TICK_S}s",
            "tests:",
            f"- interval: {TICK_S}s",
            "  input_series:",
        ]
        for rel in releases:
            for name, values in rel.series.items():
                lines += [f"  - series: '{name}'", f'    values: "{_values(values)}"']
        lines += [
            "  promql_expr_test:",
            f"  - expr: '{query}'",
            f"    eval_time: {END_S}s",
            "    exp_samples: []",
        ]
        path = Path(tmp) / "sim.yml"
        path.write_text("\n".join(lines) + "\n")
        out = subprocess.run(
            ["promtool", "test", "rules", str(path)], capture_output=True, text=True, check=False
        )
    got = re.findall(
        r'\{alertname="(\w+)", workload="([^"]+)"\} ([-+.\dE]+)', out.stdout + out.stderr
    )
    if out.returncode != 0 and not got:
        raise RuntimeError(out.stdout + out.stderr)
    return {(a, w): float(v) for a, w, v in got}


def fire_rates(
    pop: Population, *, releases: int, rules: Path, zero_init: bool, seed0: int = 0
) -> dict[str, list[float]]:
    """Per alert, when it first fired (seconds after the release start) in each release it
    fired in, over ``releases`` releases of ``pop`` (seeds ``seed0`` on)."""
    fired: dict[tuple[str, str], float] = {}
    for start in range(seed0, seed0 + releases, PER_RUN):
        seeds = range(start, min(start + PER_RUN, seed0 + releases))
        rels = [simulate(pop, seed=s, workload=f"r{s}", zero_init=zero_init) for s in seeds]
        fired |= first_fired(rels, rules)
    return {a: [s for (b, _), s in fired.items() if b == a] for a in ALERTS}


AA = Population()
POPULATIONS: dict[str, tuple[Population, str | None]] = {
    # name: (population, the alert a known-bad candidate should fire; None: identical)
    "A/A 2 req/s, 2 % errors": (AA, None),
    "A/A 10 req/s, 2 % errors": (replace(AA, rate=10), None),
    "A/A 2 req/s, 0.1 % errors": (replace(AA, error=0.001), None),
    "A/A 10 req/s, heaviest user votes all down": (
        replace(AA, rate=10, heavy_downvoter=True),
        None,
    ),
    "A/A 2 req/s, heaviest user votes all down": (replace(AA, heavy_downvoter=True), None),
    "bad 2 req/s: 3x errors (2 % base)": (replace(AA, error_factor=3), ALERTS[0]),
    "bad 10 req/s: 3x errors (2 % base)": (replace(AA, rate=10, error_factor=3), ALERTS[0]),
    "bad 2 req/s: 10x errors (2 % base)": (replace(AA, error_factor=10), ALERTS[0]),
    "bad 2 req/s: 100 % errors": (replace(AA, error_factor=50), ALERTS[0]),
    "bad 10 req/s: 3x latency": (replace(AA, rate=10, latency_factor=3), ALERTS[1]),
    "bad 10 req/s: 2x latency": (replace(AA, rate=10, latency_factor=2), ALERTS[1]),
    "bad 2 req/s: 2x latency": (replace(AA, latency_factor=2), ALERTS[1]),
    "bad 10 req/s: feedback 30 points lower": (replace(AA, rate=10, down_shift=0.3), ALERTS[2]),
    "bad 2 req/s: feedback 30 points lower": (replace(AA, down_shift=0.3), ALERTS[2]),
}


def rules_at(rev: str, dst: Path) -> Path:
    """The rule file as it was at git revision ``rev``."""
    text = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:infra/prometheus/rules.yml"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    dst.write_text(text)
    return dst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--releases", type=int, default=100)
    parser.add_argument("--before-rev", default="df2873d", help="the rules before (git rev)")
    parser.add_argument("--only", default="", help="populations whose name contains this")
    parser.add_argument("--rules", type=Path, default=RULES, help="the rules after")
    parser.add_argument("--seed0", type=int, default=0, help="the first release's seed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before = rules_at(args.before_rev, Path(tmp) / "before.yml")
        print(f"{args.releases} releases each; share of releases in which the alert fired")
        print(f"{'population':46} {'alert':28} {'before':>7} {'after':>7} {'median s':>8}")
        for name, (pop, bad) in POPULATIONS.items():
            if args.only not in name:
                continue
            runs = {"releases": args.releases, "seed0": args.seed0}
            old = fire_rates(pop, rules=before, zero_init=False, **runs)
            new = fire_rates(pop, rules=args.rules, zero_init=True, **runs)
            for alert in ALERTS if bad is None else (bad,):
                was, now = len(old[alert]), len(new[alert])
                when = f"{np.median(new[alert]):8.0f}" if now else f"{'-':>8}"
                print(
                    f"{name:46} {alert:28} {was / args.releases:7.1%} "
                    f"{now / args.releases:7.1%} {when}"
                )


if __name__ == "__main__":
    main()
