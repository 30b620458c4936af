"""The drift scenario (``flywheel run --scenario drift``): the calculator's users start asking
exponentiation halfway, and a candidate better at additions but worse at powers passes the
gate on the old golden set, is caught by the canary, and is rejected by the gate after
``golden propose`` and a reviewer's acceptance refreshed the set.

What is real and what is scripted, so that it runs in seconds:

- real: the golden gate (:func:`tasks.release.gate.gate.run_gate`: the stage-2 reward with the demo's
  verifier, the paired tests, the checks), the canary's analysis of one step
  (:func:`tasks.release.canary.canary.analyse_step`), the coverage measure
  (:mod:`tasks.golden_coverage`), ``golden propose`` and ``golden review``
  (:mod:`tasks.golden_proposals`, :mod:`tasks.golden_review`) on
  ``flywheel.training_examples``, the new golden version, the ``release_outcomes`` rows and the
  agreement report;
- scripted: the model versions answer by a fixed accuracy per kind of question (as the release
  tests' fake upstreams do; a more accurate version is right wherever a less accurate one is),
  the users' traffic is answered in process (no gateway), and the curated rows are written as
  curate would write them for questions without personal data (the scripted users send none,
  so there is nothing to anonymise; :mod:`tasks.demo.drift_traffic`). The whole loop with trained
  models is ``flywheel run``.

It runs in a home of its own (``<FLYWHEEL_HOME>/scenarios/drift``, emptied first) with a copy
of the repository's calculator golden set, so nothing of the main home changes.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tasks.demo.drift_traffic import VERSIONS, Ask, Scripted, traffic
from tasks.golden import GOLDEN_DIR

WORKLOAD = "calculator"
CANARY_USERS = 600  # the canary step's users: each votes once, on their first answer


@dataclass
class Gate:
    """One gate decision, as printed."""

    version: str
    golden_version: str
    items: int
    decision: str
    p_value: float
    mean_diff: float
    reasons: list[str]
    summary: dict[str, Any] = field(repr=False, default_factory=dict)

    def line(self) -> str:
        """One line a person reads."""
        return (
            f"gate {self.version} vs v0 on golden {self.golden_version} ({self.items} items): "
            f"{self.decision} (paired t-test p={self.p_value:.3g}, mean difference "
            f"{self.mean_diff:+.4f})"
        )


@dataclass
class DriftReport:
    """What the scenario showed."""

    home: str
    coverage_before: float
    coverage_after_shift: float
    coverage_after_refresh: float
    uncovered_example: str | None
    old_gates: list[Gate]
    canaries: list[str]
    proposed: int
    refused: dict[str, int]
    accepted: int
    new_golden_version: str
    new_gates: list[Gate]
    agreement: str
    contradictions_in_row: int
    plot: str | None  # the agreement plot (None: matplotlib is not installed)
    wall_s: float

    def text(self) -> str:
        """The scenario's printout."""
        lines = [
            f"drift scenario (home {self.home})",
            f"coverage of the calculator's prompts by the golden set: before the shift "
            f"{self.coverage_before:.0%}, after users start asking powers "
            f"{self.coverage_after_shift:.0%}, after the refresh {self.coverage_after_refresh:.0%}",
            f"  uncovered, e.g.: {self.uncovered_example!r}",
            "old golden set:",
            *[f"  {g.line()}" for g in self.old_gates],
            *[f"  {c}" for c in self.canaries],
            f"  canary contradicted the gate in {self.contradictions_in_row} releases in a row: "
            + (
                "GoldenGateContradicted fires"
                if self.contradictions_in_row >= 2
                else "no alert yet"
            ),
            f"golden propose: {self.proposed} proposal(s) from the uncovered clusters "
            f"(refused: {self.refused or 'none'}); a reviewer accepted {self.accepted}: "
            f"new golden version {self.new_golden_version}",
            "refreshed golden set:",
            *[f"  {g.line()}" for g in self.new_gates],
            "agreement report:",
            *[f"  {line}" for line in self.agreement.splitlines()],
            f"  plot: {self.plot or 'not written (matplotlib is not installed)'}",
            f"took {self.wall_s:.1f} s",
        ]
        return "\n".join(lines)


def run_drift(
    home: Path, *, requests: int = 400, seed: int = 0, per_cluster: int = 200
) -> DriftReport:
    """Run the scenario in ``home`` (emptied first; see module)."""
    from tasks.demo.serving import environment

    started = time.monotonic()
    if home.exists():
        shutil.rmtree(home)
    golden = home / "golden"
    golden.mkdir(parents=True)
    for f in GOLDEN_DIR.glob("*.jsonl"):
        shutil.copy2(f, golden / f.name)
    from tasks.golden import write_manifest

    write_manifest(golden)
    env = {
        "FLYWHEEL_HOME": str(home),
        "FLYWHEEL_REWARD__GOLDEN": str(golden),
        "FLYWHEEL_STORE_URL": str(home / "store"),
        "FLYWHEEL_CATALOG_TYPE": "sql",
        "FLYWHEEL_CATALOG_URI": f"sqlite:///{home / 'catalog.db'}",
    }
    with environment(**env):
        return _scenario(home, requests=requests, seed=seed, per_cluster=per_cluster, t0=started)


def _scenario(home: Path, *, requests: int, seed: int, per_cluster: int, t0: float) -> DriftReport:
    from infra.runtime import Runtime
    from tasks.golden import settings_golden_set
    from tasks.golden_coverage import GoldenSet, measure
    from tasks.golden_proposals import export, pending, propose
    from tasks.golden_review import review
    from tasks.release.gate.agreement import read_outcomes
    from tasks.release.gate.agreement_report import agreement, agreement_plot, agreement_text

    rt = Runtime.from_env()
    settings = rt.settings
    items, version = settings_golden_set(settings.reward, WORKLOAD, workloads=settings.workloads)
    threshold = settings.curate.coverage_similarity

    def coverage(asks: list[Ask], golden: list[Any], gv: str) -> Any:
        return measure(
            [a.question for a in asks],
            GoldenSet([it.question for it in golden], gv),
            workload=WORKLOAD,
            window="scenario",
            threshold=threshold,
        )

    before = traffic(requests, power_share=0.0, seed=seed)
    shifted = traffic(requests, power_share=0.5, seed=seed + 1)
    cov_before, cov_shift = coverage(before, items, version), coverage(shifted, items, version)
    _curate(rt, shifted, stable=Scripted("v0", VERSIONS["v0"]))  # what users asked v0
    old_gates, canaries = [], []
    for n, candidate in enumerate(("v1", "v2"), start=1):
        gate = _gate(rt, items, version, candidate)
        old_gates.append(gate)
        canaries.append(_canary(rt, gate, seed=seed + 10 + n, requests=requests, release=n))
    found = propose(rt, WORKLOAD, per_cluster=per_cluster)
    queued = pending(rt.catalog, WORKLOAD)
    decisions = [{**json.loads(line), "decision": "accept"} for line in export(queued).splitlines()]
    done = review(rt, "".join(json.dumps(d) + "\n" for d in decisions), reviewer="drift-scenario")
    items2, version2 = settings_golden_set(settings.reward, WORKLOAD, workloads=settings.workloads)
    new_gates = [_gate(rt, items2, version2, v) for v in ("v1", "v2")]
    rows = read_outcomes(rt.catalog, WORKLOAD)
    summary = agreement(rows)
    plot = agreement_plot(rows, str(home / "agreement.png"))
    first = next((c for c in cov_shift.clusters if c.example), None)
    return DriftReport(
        home=str(home),
        coverage_before=cov_before.share,
        coverage_after_shift=cov_shift.share,
        coverage_after_refresh=coverage(shifted, items2, version2).share,
        uncovered_example=first.example if first else None,
        old_gates=old_gates,
        canaries=canaries,
        proposed=len(found.proposals),
        refused=found.refused,
        accepted=done.accepted,
        new_golden_version=version2,
        new_gates=new_gates,
        agreement=agreement_text(rows, summary),
        contradictions_in_row=summary["contradictions_in_row"],
        plot=plot,
        wall_s=time.monotonic() - t0,
    )


def _curate(rt: Any, asks: list[Ask], *, stable: Scripted) -> None:
    """The shifted traffic as curate writes it: each request answered by the stable version,
    its reward the verifier's verdict (the demo's scale: right 1.0, wrong 0.0) beside a
    faithful answer's other components."""
    from infra.catalog import append_rows

    now = datetime.now(UTC)
    rows = []
    for i, ask in enumerate(asks):
        answer = stable.reply(ask.messages)
        right = answer == ask.right
        rows.append(
            {
                "trace_id": f"drift-{i:05d}",
                "prompt_group": f"drift-{i:05d}",
                "user_key": ask.user,
                "question": ask.question,
                "contexts": [str(ask.messages[-1]["content"])],
                "answer": answer,
                "reward": 0.95 if right else 0.3,
                "reward_judge": 1.0 if right else 0.0,
                "model_version": stable.version,
                "pattern": re.sub(r"\d+", "<NUM>", ask.question.lower()),
                "pii_entities": [],
                "eligible_as": "train" if right else "rejected_only",
                "window": "scenario",
                "created_at": now,
                "workload": WORKLOAD,
                "messages": json.dumps(ask.messages),
            }
        )
    append_rows(rt.catalog, "training_examples", rows)


def _gate(rt: Any, items: list[Any], golden_version: str, candidate: str) -> Gate:
    """The golden gate, candidate against v0, on ``items``."""
    from tasks.release.gate.gate import run_gate
    from tasks.release.gate.gate_inputs import GateInputs
    from tasks.reward import Scorer

    result = run_gate(
        GateInputs(
            items=items,
            baseline=Scripted("v0", VERSIONS["v0"]),
            candidate=Scripted(candidate, VERSIONS[candidate]),
            scorer=Scorer(rt.settings),
            policy=rt.settings.release,
            workload=WORKLOAD,
            golden_version=golden_version,
        )
    )
    t = result.test
    return Gate(
        version=candidate,
        golden_version=golden_version,
        items=t.n,
        decision=result.decision.value,
        p_value=t.p_value,
        mean_diff=t.mean_diff,
        reasons=result.reasons,
        summary=result.summary(),
    )


def _canary(rt: Any, gate: Gate, *, seed: int, requests: int, release: int) -> str:
    """One canary step at 50 % on the shifted traffic (twice the phase's requests, from up to
    :data:`CANARY_USERS` users): each user's first vote (up when the answer is right), judged
    by the canary's analysis; its ``release_outcomes`` row."""
    from infra.metrics.promql import CanaryWindow, RouteStats
    from tasks.release.canary.canary import analyse_step
    from tasks.release.gate.agreement import Release, outcome_row, write_outcome
    from tasks.release.gate.agreement_online import CanaryWatch

    if gate.decision != "PROCEED_TO_SHADOW":
        return f"canary {gate.version}: not reached (the gate said {gate.decision})"
    sides = {
        "candidate": Scripted(gate.version, VERSIONS[gate.version]),
        "stable": Scripted("v0", VERSIONS["v0"]),
    }
    stats = {k: RouteStats(p99_s=0.2) for k in sides}
    voted: set[str] = set()
    users: dict[str, set[str]] = {k: set() for k in sides}
    for ask in traffic(2 * requests, power_share=0.5, seed=seed, users=CANARY_USERS):
        side = "candidate" if random.Random(f"{release}:{ask.user}").random() < 0.5 else "stable"
        s = stats[side]
        s.requests += 1
        users[side].add(ask.user)
        if ask.user not in voted:  # each user's first vote
            voted.add(ask.user)
            vote = 1 if sides[side].reply(ask.messages) == ask.right else -1
            s.feedback[vote] = s.feedback.get(vote, 0.0) + 1
    for k, s in stats.items():
        s.users = float(len(users[k]))
    policy = rt.settings.release.model_copy(
        update={"min_requests_per_step": 10, "min_users_per_step": 5}
    )
    window = CanaryWindow(stats["candidate"], stats["stable"], "scenario", 60.0)
    result = analyse_step(window, policy)
    start = datetime.now(UTC)
    released = Release(
        release_id=f"drift-release-{release}",
        workload=WORKLOAD,
        version=gate.version,
        baseline="v0",
        outcome="rolled_back" if result.verdict == "fail" else "promoted",
    )
    canary = CanaryWatch(windows=[result.evidence], start=start - timedelta(minutes=1), end=start)
    row = outcome_row(
        released, gate=gate.summary, canary=canary, alpha=policy.alpha, created_at=start
    )
    write_outcome(rt.catalog, row)
    verdict = "rolled back" if result.verdict == "fail" else result.verdict
    return (
        f"canary {gate.version} at 50 %: {verdict} ({'; '.join(result.reasons)[:200]}); online "
        f"feedback {row['feedback_candidate']:.2f} vs {row['feedback_stable']:.2f}"
        + (": contradicts the gate" if row["contradicts"] else "")
    )
