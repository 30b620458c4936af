"""The whole loop: the hourly data flow, the weekly train-and-release flow, and ``run`` (the
README's main job: one or more improvement cycles on embedded defaults)."""

from __future__ import annotations

from datetime import datetime

from prefect import flow, get_run_logger

from flows.collect import collect
from flows.curate import curate
from flows.score import score
from infra.keys import parse_window_start


@flow(name="hourly", log_prints=False)
def hourly(window_start: datetime | None = None) -> dict[str, object]:
    """Hourly data loop for one window (default: the last closed hour): collect the traces,
    score every one, curate them into flywheel.training_examples. Each stage is a subflow run
    of its own, so a failed stage can be retried alone from the UI."""
    start = parse_window_start(window_start)
    collected = collect(window_start=start, hours=1)
    scored = score(window_start=start, hours=1)
    curated = curate(window_start=start)
    get_run_logger().info("hourly %s done", collected.window)
    return {"collect": collected, "score": scored, "curate": curated}
