"""``python -m tests.faults.release_run VERSION GATEWAY_URL ADMIN_URL``: the release flow in its
own process, as a deployment runs it, with the fault suite's short pacing (a small golden set,
one short shadow phase, one short canary step) and canary metrics read from ``ADMIN_URL``'s
/admin/metrics (the release's own option, for the metrics alone). Routing goes through the
store (no ``FLYWHEEL_GATEWAY__ADMIN_URL``), so the process's own writes of
``deploy/state.json`` are the crash points."""

from __future__ import annotations

import sys

OPTIONS = {
    "max_golden_items": 40,
    "shadow_fraction": 0.5,
    "min_shadow_pairs": 5,
    "analysis_interval_s": 1,
    "step_deadline_s": 30,
    "canary_steps": [100],
    "min_requests_per_step": 3,
}


def main(version: str, gateway_url: str, admin_url: str) -> int:
    """Run the release; 0 once it has concluded (promoted, rolled back, held, ...)."""
    from flows.release import ReleaseOptions, release

    options = ReleaseOptions(gateway_url=gateway_url, admin_url=admin_url, **OPTIONS)
    out = release(version, options)
    print(f"release {version}: {out.outcome} ({'; '.join(out.reasons)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
