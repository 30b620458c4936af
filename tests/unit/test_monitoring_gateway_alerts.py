"""The gateway's connection-limit alert under ``promtool test rules`` with the real rule file:
it fires, per instance and limit, while connections are refused minute after minute, and not
for a burst of a few minutes (a client's retry storm that passed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_monitoring_alerts import check_alert, series

REFUSED = "flywheel_connections_refused_total"


def refused(values: str, limit: str, instance: str = "gw-1:8080") -> dict[str, str]:
    return series(REFUSED, values, job="gateway", instance=instance, limit=limit)


def fired(limit: str, instance: str = "gw-1:8080") -> dict[str, str]:
    return {"severity": "warning", "instance": instance, "limit": limit}


CASES: dict[str, tuple[list[dict[str, str]], str, str, list[dict[str, str]]]] = {
    "one client over its share for 20 minutes": (
        [refused("0+5x30", "client"), refused("0x30", "total")],
        "GatewayRefusingConnections",
        "20m",
        [fired("client")],
    ),
    "the gateway full on one instance only": (
        [refused("0+40x30", "total"), refused("0x30", "total", instance="gw-2:8080")],
        "GatewayRefusingConnections",
        "20m",
        [fired("total")],
    ),
    "refusals for six minutes, then none": (  # a client's retry storm that passed
        [refused("0x10 0+50x6 300x14", "client")],
        "GatewayRefusingConnections",
        "20m",
        [],
    ),
    "no refusals": ([refused("0x30", "client")], "GatewayRefusingConnections", "20m", []),
}


@pytest.mark.parametrize("case", list(CASES))
def test_connection_limit_alert(case: str, tmp_path: Path) -> None:
    check_alert(CASES[case], tmp_path)
