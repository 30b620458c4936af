"""Release decisions' error rates, measured on simulated releases through the real decision
code (tests/benchmarks/release_sim.py, release_world.py, release_prom.py), per population:
how often a candidate identical to stable is rolled back or held (A/A: the whole release's
false rollback, shadow + canary + alerts, then with the golden gate), and how often each
known-bad candidate is caught, with the median number of candidate requests it took. Then the
wrong designs beside the right ones: stable's previous hour as the baseline under a load ramp,
per-request counting for heavy users, and a student's cost rail at 1.0x (a test over the step's
slices: a point threshold there once rolled back 4 of 5 identical students).

    .venv/bin/python tests/benchmarks/bench_release_decisions.py --runs 20 --prometheus

``--prometheus`` (the default where Debian's ``prometheus`` and ``promtool`` are installed): read
through a real Prometheus with the real alert rules; ``--embedded``: the gateway's exposition
read directly, no alert rules (cheap; what the unit test's fast twin uses).
``--populations``: a subset, names as printed, separated by ";". ``--aa-only``: the identical
candidate's row alone (the false-rollback rate, with more releases for a tighter interval).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.benchmarks.release_sim import (  # noqa: E402
    POLICY,
    POPULATIONS,
    RAMP,
    SAME,
    Population,
    Version,
    gate_table,
    rate_interval,
    rows_for,
    simulate_release,
    summarize,
)

WHY = False  # --why
# --batch: releases simulated through one Prometheus at a time. Each holds its world in memory
# until the batch ends (about 140 MB a release of heavy users): 150 heavy-user releases in one
# batch took 20.7 GB and were killed by the kernel on this 24 GB machine
BATCH = 25

HEADER = (
    "| candidate | promoted | rolled back | held | ended in | rate (95 % CI) | "
    "median requests to catch | s/release |\n|---|---|---|---|---|---|---|---|"
)


def run_rows(
    rows: list[tuple[str, Version, Population]],
    *,
    runs: int,
    seed: int,
    prometheus: bool,
    **kw: Any,
) -> list[dict[str, Any]]:
    """``runs`` releases of each row; each row's summary and seconds per release (through
    Prometheus, ``BATCH`` releases at a time share one TSDB: the time is the batches', per
    release)."""
    started = time.perf_counter()
    items = [
        (cand, pop, seed + 10_000 * i + r)
        for i, (_, cand, pop) in enumerate(rows)
        for r in range(runs)
    ]
    if prometheus:
        from tests.benchmarks.release_prom import simulate_batch

        outcomes = []
        for i in range(0, len(items), BATCH):
            outcomes += simulate_batch(items[i : i + BATCH], **kw)
            print(f"{len(outcomes)} of {len(items)} releases", file=sys.stderr, flush=True)
    else:
        outcomes = [simulate_release(c, seed=s, pop=p, **kw) for c, p, s in items]
    per = (time.perf_counter() - started) / max(1, len(items))
    out = []
    for i, (name, _, _) in enumerate(rows):
        row = summarize(name, outcomes[i * runs : (i + 1) * runs])
        if WHY and row["aa"]:  # why each identical candidate was rolled back
            for (_, _, seed_i), o in zip(
                items[i * runs : (i + 1) * runs], outcomes[i * runs : (i + 1) * runs], strict=True
            ):
                if o.outcome == "rolled_back":
                    print(f"<!-- seed {seed_i}: {o.phase}: {' | '.join(o.reasons)} -->")
        out.append(row | {"s_per_release": per})
    return out


def print_row(name: str, row: dict[str, Any], gate_false: tuple[int, int] | None = None) -> None:
    """One table row; an A/A row is followed by the same with the gate's A/A rate combined."""
    n = row["runs"]
    # A/A: rolled back (held for a person is counted in its column: a cost, not a rollback)
    bad = row["rolled_back"] if row["aa"] else row["promoted"]
    lo, hi = rate_interval(bad, n)
    what = "false rollback" if row["aa"] else "missed"
    where = ", ".join(f"{k} {v}" for k, v in sorted(row["by_phase"].items())) or "-"
    print(
        f"| {name} | {row['promoted']} | {row['rolled_back']} | {row['held']} | {where} | "
        f"{what} {bad / n:.1%} ({lo:.1%}-{hi:.1%}) | {_or_dash(row['median_requests_to_catch'])} | "
        f"{row['s_per_release']:.1f} |"
    )
    if row["aa"] and gate_false is not None:
        g, gn = gate_false
        glo, ghi = rate_interval(g, gn)
        both = 1 - (1 - bad / n) * (1 - g / gn)
        blo, bhi = 1 - (1 - lo) * (1 - glo), 1 - (1 - hi) * (1 - ghi)
        print(
            f"| {name}, golden gate included | | | | gate {g}/{gn} | "
            f"false rollback {both:.1%} ({blo:.1%}-{bhi:.1%}) | - | |"
        )


def _or_dash(value: Any) -> Any:
    return "-" if value is None else value


def population_tables(args: argparse.Namespace, gate_false: tuple[int, int]) -> None:
    """Per population: A/A (without, then with the gate) and every known-bad candidate."""
    names = args.populations.split(";") if args.populations else list(POPULATIONS)
    reader = "Prometheus + alert rules" if args.prometheus else "embedded reader, no alert rules"
    for p, pname in enumerate(names):
        pop = POPULATIONS[pname]
        print(f"\n### {pname} ({reader}; {args.runs} releases per row)\n\n{HEADER}")
        rows = [r for r in rows_for(pop) if not args.aa_only or r[1] == SAME]
        seed = 1_000_000 * (p + 1)
        summaries = run_rows(rows, runs=args.runs, seed=seed, prometheus=args.prometheus)
        for (name, _, _), row in zip(rows, summaries, strict=True):
            print_row(name, row, gate_false)
        sys.stdout.flush()


def design_contrasts(args: argparse.Namespace) -> None:
    """The wrong designs beside the right ones, A/A (embedded reader)."""
    heavy = POPULATIONS["heavy users"]
    cost = POLICY.model_copy(update={"cost_ratio_max": 1.0})
    rows: list[tuple[str, Population, dict[str, Any]]] = [
        ("load ramp, concurrent stable (the release)", Population(load=RAMP), {}),
        (
            "load ramp, stable's previous hour (wrong)",
            Population(load=RAMP),
            {"history_baseline": True},
        ),
        ("heavy users, one voice per user (the release)", heavy, {}),
        ("heavy users, every request counted (wrong)", heavy, {"voices_per_step": 10**6}),
        ("student, cost rail at 1.0x (a sign test over slices)", Population(), {"policy": cost}),
    ]
    print(f"\n### Approaches compared (A/A, embedded reader; {args.runs} releases per row)")
    print(f"\n{HEADER}")
    for i, (name, pop, kw) in enumerate(rows):
        (row,) = run_rows(
            [(f"A/A: {name}", SAME, pop)],
            runs=args.runs,
            seed=9_000_000 + 10_000 * i,
            prometheus=False,
            **kw,
        )
        print_row(f"A/A: {name}", row)
        sys.stdout.flush()


def gate_rows(runs: int) -> tuple[int, int]:
    """The golden gate's table; returns its A/A (rolled back, runs)."""
    print(f"\n### Golden gate (400 items, alpha {POLICY.alpha:g}), {runs} sets per row\n")
    print("| candidate | proceed | manual review | rollback | proceed rate | rollback rate |")
    print("|---|---|---|---|---|---|")
    table = gate_table(runs)
    for name, counts in table.items():
        n = sum(counts.values())
        cells = []
        for decision in ("PROCEED_TO_SHADOW", "ROLLBACK"):
            lo, hi = rate_interval(counts[decision], n)
            cells.append(f"{counts[decision] / n:.1%} ({lo:.1%}-{hi:.1%})")
        print(
            f"| {name} | {counts['PROCEED_TO_SHADOW']} | {counts['MANUAL_REVIEW']} | "
            f"{counts['ROLLBACK']} | {cells[0]} | {cells[1]} |"
        )
    aa = table["A/A (identical)"]  # held for review is the right call for no gain: not counted
    return aa["ROLLBACK"], sum(aa.values())


def main() -> None:
    global WHY, BATCH
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--gate-runs", type=int, default=400)
    ap.add_argument("--prometheus", action="store_true", default=None)
    ap.add_argument("--embedded", dest="prometheus", action="store_false")
    ap.add_argument("--populations", default="")
    ap.add_argument("--no-contrasts", action="store_true")
    ap.add_argument("--aa-only", action="store_true")
    ap.add_argument("--why", action="store_true", help="print why each A/A release rolled back")
    ap.add_argument(
        "--batch", type=int, default=BATCH, help="releases through one Prometheus at a time"
    )
    args = ap.parse_args()
    WHY, BATCH = args.why, max(1, args.batch)
    if args.prometheus is None:  # production's reader when its binaries are here
        args.prometheus = bool(shutil.which("prometheus") and shutil.which("promtool"))
    started = time.perf_counter()
    print(
        f"alpha {POLICY.alpha:g}, steps {list(POLICY.canary_steps)}, holdback "
        f"{POLICY.stable_holdback:g} %, horizon {POLICY.analysis_interval_s:g} s, deadline "
        f"{POLICY.step_deadline_s:g} s"
    )
    gate_false = gate_rows(args.gate_runs)
    population_tables(args, gate_false)
    if not args.no_contrasts:
        design_contrasts(args)
    print(f"\n{time.perf_counter() - started:.0f} s; reproduce: {' '.join(sys.argv)}")


if __name__ == "__main__":
    main()
