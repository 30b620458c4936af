"""The gateway for 25 s at 200 req/s while its upstream fails 20 % of calls and the S3 store
fails 20 % of writes: no error beyond the upstream's own, memory flat, every trace spooled or
counted as dropped, the store's retries on ``/metrics``. The 5-minute run with the same
checks is ``tests/benchmarks/bench_gateway_soak.py`` (``make bench``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults.soak import check, soak

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_gateway_under_upstream_and_store_faults_keeps_serving(tmp_path: Path) -> None:
    result = soak(tmp_path / "home", rate=200, seconds=20, warmup_s=5)

    assert result.requests >= 4000
    check(result)
