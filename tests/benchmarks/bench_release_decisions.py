"""Release decisions' error rates, measured on simulated releases through the real analysis
(tests/benchmarks/release_sim.py): how often a candidate identical to stable is rolled back or
held (A/A, must be <= alpha), and how often known-bad candidates are caught (>= 95 %), with the
median number of candidate requests it took; the same for the golden gate alone. Load comes
and goes (bursts 7 s on, 5 s off, 3x slower and 1.5x the rate while busy).

    .venv/bin/python tests/benchmarks/bench_release_decisions.py [--runs 200] [--gate-runs 400]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main() -> None:
    from tests.benchmarks.release_sim import POLICY, canary_table, gate_table, rate_interval

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--gate-runs", type=int, default=400)
    args = ap.parse_args()
    started = time.perf_counter()
    print(f"canary (alpha {POLICY.alpha:g}, steps {list(POLICY.canary_steps)}, ", end="")
    print(f"holdback {POLICY.stable_holdback:g} %), {args.runs} releases per row")
    print("| candidate | promoted | rolled back | held | bad rate (95 % CI) | median requests |")
    print("|---|---|---|---|---|---|")
    for name, row in canary_table(args.runs).items():
        bad = row["rolled_back"] + row["held"] if name.startswith("A/A") else row["promoted"]
        lo, hi = rate_interval(bad, row["runs"])
        what = "false alarm" if name.startswith("A/A") else "missed"
        print(
            f"| {name} | {row['promoted']} | {row['rolled_back']} | {row['held']} | "
            f"{what} {bad / row['runs']:.1%} ({lo:.1%}-{hi:.1%}) | "
            f"{row['median_requests_to_catch'] or '-'} |"
        )
    print(f"\ngolden gate (400 items, alpha {POLICY.alpha:g}), {args.gate_runs} sets per row")
    print("| candidate | proceed | manual review | rollback | proceed rate | rollback rate |")
    print("|---|---|---|---|---|---|")
    for name, counts in gate_table(args.gate_runs).items():
        n = sum(counts.values())
        cells = []
        for decision in ("PROCEED_TO_SHADOW", "ROLLBACK"):
            lo, hi = rate_interval(counts[decision], n)
            cells.append(f"{counts[decision] / n:.1%} ({lo:.1%}-{hi:.1%})")
        print(
            f"| {name} | {counts['PROCEED_TO_SHADOW']} | {counts['MANUAL_REVIEW']} | "
            f"{counts['ROLLBACK']} | {cells[0]} | {cells[1]} |"
        )
    print(f"\n{time.perf_counter() - started:.0f} s; reproduce: {' '.join(sys.argv)}")


if __name__ == "__main__":
    main()
