"""The gateway soak of issue 27 at full length: 200 req/s for 5 minutes while the upstream
fails 20 % of calls and the S3 store fails 20 % of writes, with the checks of the bounded
test (``tests/faults/test_gateway_soak.py``): no error beyond the upstream's own, RSS growth
under 10 % after warm-up, every trace spooled or counted as dropped.

    PYTHONPATH=. python tests/benchmarks/bench_gateway_soak.py [--seconds 300] [--rate 200]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from tests.faults.soak import check, soak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--rate", type=float, default=200)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="flywheel-soak-")) / "home"
    result = soak(home, rate=args.rate, seconds=args.seconds, warmup_s=15)
    growth = result.rss_end_kib / result.rss_warm_kib - 1
    print(
        f"{result.requests} requests, {result.errors} errors "
        f"(upstream failed {result.upstream_failures}), {result.no_reply} without a reply; "
        f"RSS {result.rss_warm_kib / 1024:.0f} -> {result.rss_end_kib / 1024:.0f} MiB "
        f"({growth:+.1%}); traces {len(result.trace_ids)} answered, "
        f"{len(result.trace_ids & result.spooled)} spooled, {result.dropped:.0f} dropped; "
        f"store faults {result.store_faults}, retries {result.retries}"
    )
    check(result)
    print("ok")


if __name__ == "__main__":
    main()
