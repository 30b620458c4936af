"""Stage metrics (docs/operating/monitoring.md) and their delivery to a Prometheus Pushgateway.

Each stage run builds a :class:`StageReport`. :func:`publish` folds it into cumulative
counters kept in the object store (``metrics/<stage>.json``) so that ``_total`` series keep
counting across processes, and pushes the stage's group (``job=flywheel, stage=<stage>``) when
``FLYWHEEL_PUSHGATEWAY_URL`` is set. A Pushgateway that is down never fails a stage: the
failure is logged and counted (``flywheel_metrics_push_failures_total``).
"""

from __future__ import annotations

import json
import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from infra.errors import ObjectNotFound, StoreError, redact_url
from infra.keys import metrics_key
from infra.retries import RETRIES
from infra.store import ObjectStore

log = logging.getLogger(__name__)

REWARD_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)

HELP = {
    "flywheel_stage_runs_total": "Stage runs by final status.",
    "flywheel_stage_duration_seconds": "Wall time of stage runs.",
    "flywheel_stage_records_total": "Records a stage handled, by outcome.",
    "flywheel_stage_last_success_timestamp_seconds": "Unix time of the stage's last success.",
    "flywheel_reward": "Reward per component (stage 2).",
    "flywheel_pii_entities_total": "PII entities removed, by type (stage 3).",
    "flywheel_gate_decisions_total": "Release gate decisions.",
    "flywheel_metrics_push_failures_total": "Failed pushes to the Pushgateway.",
    "flywheel_retries_total": "Retries of transient I/O failures, by operation.",
    "flywheel_reward_missing_total": "Scored traces lacking a reward component (stage 2).",
    "flywheel_reward_not_applicable_total": "Missing components that did not apply (stage 2).",
    "flywheel_reward_ineligible_total": "Scored traces missing a required component (stage 2).",
    "flywheel_feedback_late_total": "Traces whose feedback changed after collect (stage 1).",
    "flywheel_reward_human_spearman": "Spearman of reward and human score, latest review week.",
    "flywheel_reward_human_samples": "Human labels behind flywheel_reward_human_spearman.",
    "flywheel_review_queued_total": "Traces queued for human review, by reason.",
    "flywheel_judge_feedback_agreement": "Share of judge verdicts users' feedback agrees with.",
    "flywheel_reward_length_spearman": "Spearman of reward and answer length (last window).",
    "flywheel_answer_distinct_ratio": "Distinct answers / answers (last window).",
    "flywheel_train_entropy": "Token entropy the trainer logged last (per method).",
    "flywheel_candidate_kl": "KL(candidate || baseline) per answer token at the gate.",
    "flywheel_judge_feedback_pairs": "Traces behind flywheel_judge_feedback_agreement.",
    "flywheel_reward_length_samples": "Traces behind flywheel_reward_length_spearman.",
    "flywheel_answer_distinct_answers": "Answers behind flywheel_answer_distinct_ratio.",
    "flywheel_erasure_oldest_pending_seconds": "Age of the oldest open erasure (0: none).",
    "flywheel_erasure_deadline_seconds": "FLYWHEEL_ERASURE__DEADLINE_DAYS in seconds.",
    "flywheel_erasure_replacement_failed": "Erasures whose replacement failed the gate.",
    "flywheel_pii_canary_recall": "Planted canary values removed / planted, last curate run.",
    "flywheel_release_offline_diff": "Gate's golden reward difference, latest canaried release.",
    "flywheel_release_online_diff": "Canary's online difference (feedback), latest release.",
    "flywheel_release_contradicts": "1 when the latest release's canary contradicted its gate.",
    "flywheel_release_contradictions_in_row": "Latest releases in a row the canary contradicted.",
    "flywheel_golden_coverage": "Share of the window's prompts a golden item covers (curate).",
    "flywheel_golden_uncovered_clusters": "Clusters of uncovered prompts, last curate run.",
}
HISTOGRAM_BUCKETS = {
    "flywheel_stage_duration_seconds": DURATION_BUCKETS,
    "flywheel_reward": REWARD_BUCKETS,
}

Labels = tuple[tuple[str, str], ...]


def _labels(labels: dict[str, str]) -> Labels:
    return tuple(sorted((k, str(v)) for k, v in labels.items()))


@dataclass
class StageReport:
    """What one stage run observed; cheap to build inside tasks, published once by the flow."""

    stage: str
    counters: dict[str, dict[Labels, float]] = field(default_factory=lambda: defaultdict(dict))
    gauges: dict[str, dict[Labels, float]] = field(default_factory=lambda: defaultdict(dict))
    observations: dict[str, dict[Labels, list[float]]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    # gauges whose every series this run replaces (a label set it does not set again goes)
    replaced: set[str] = field(default_factory=set)

    def count(self, name: str, value: float = 1.0, **labels: str) -> None:
        """Add ``value`` to the counter ``name`` with ``labels``."""
        key = _labels(labels)
        series = self.counters[name]
        series[key] = series.get(key, 0.0) + value

    def records(self, outcome: str, n: int) -> None:
        """Count ``n`` records of this stage with ``outcome`` (``flywheel_stage_records_total``)."""
        self.count("flywheel_stage_records_total", n, stage=self.stage, outcome=outcome)

    def gauge(self, name: str, value: float, **labels: str) -> None:
        """Set the gauge ``name`` with ``labels`` to ``value``."""
        self.gauges[name][_labels(labels)] = value

    def replace(self, name: str) -> None:
        """Publish the gauge ``name`` with only the series this run sets (none: the family
        goes), instead of updating them among the earlier runs' series."""
        self.replaced.add(name)

    def observe(self, name: str, values: Iterable[float], **labels: str) -> None:
        """Add ``values`` to the histogram observations of ``name`` with ``labels``."""
        self.observations[name].setdefault(_labels(labels), []).extend(values)


def _load_state(store: ObjectStore, stage: str) -> dict[str, Any]:
    try:
        return dict(json.loads(store.get(metrics_key(stage))))
    except (ObjectNotFound, ValueError):
        return {"counters": {}, "gauges": {}, "histograms": {}}


def _fold(state: dict[str, Any], report: StageReport) -> dict[str, Any]:
    for name, series in report.counters.items():
        dest = state["counters"].setdefault(name, {})
        for labels, value in series.items():
            key = json.dumps(labels)
            dest[key] = dest.get(key, 0.0) + value
    for name in report.replaced:
        state["gauges"].pop(name, None)
    for name, series in report.gauges.items():
        dest = state["gauges"].setdefault(name, {})
        for labels, value in series.items():
            dest[json.dumps(labels)] = value
    for name, obs in report.observations.items():
        buckets = HISTOGRAM_BUCKETS.get(name, REWARD_BUCKETS)
        hists = state["histograms"].setdefault(name, {})
        for labels, values in obs.items():
            key = json.dumps(labels)
            hist = hists.setdefault(key, {"buckets": [0] * (len(buckets) + 1), "sum": 0.0})
            for v in values:
                idx = next((i for i, b in enumerate(buckets) if v <= b), len(buckets))
                hist["buckets"][idx] += 1
                hist["sum"] += v
    return state


class _StateCollector(Collector):
    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def collect(self) -> Iterator[Any]:
        for name, series in self.state["counters"].items():
            names = _label_names(series)
            fam = CounterMetricFamily(
                name.removesuffix("_total"), HELP.get(name, name), labels=names
            )
            for key, value in series.items():
                fam.add_metric([v for _k, v in json.loads(key)], value)
            yield fam
        for name, series in self.state["gauges"].items():
            fam = GaugeMetricFamily(name, HELP.get(name, name), labels=_label_names(series))
            for key, value in series.items():
                fam.add_metric([v for _k, v in json.loads(key)], value)
            yield fam
        for name, series in self.state["histograms"].items():
            bounds = HISTOGRAM_BUCKETS.get(name, REWARD_BUCKETS)
            fam = HistogramMetricFamily(name, HELP.get(name, name), labels=_label_names(series))
            for key, hist in series.items():
                cum, acc = [], 0
                for bound, n in zip([*map(str, bounds), "+Inf"], hist["buckets"], strict=True):
                    acc += n
                    cum.append((bound, acc))
                fam.add_metric([v for _k, v in json.loads(key)], cum, hist["sum"])
            yield fam


def _label_names(series: dict[str, Any]) -> list[str]:
    first = next(iter(series), None)
    return [k for k, _v in json.loads(first)] if first else []


def build_registry(state: dict[str, Any]) -> CollectorRegistry:
    """A Prometheus registry exposing a published metric state."""
    registry = CollectorRegistry()
    registry.register(_StateCollector(state))
    return registry


_RETRIES_SEEN: dict[str, int] = {}  # the retries this process already folded into a stage


def publish(
    report: StageReport,
    *,
    store: ObjectStore,
    status: str,
    duration_s: float,
    pushgateway_url: str | None,
) -> dict[str, Any]:
    """Fold the run into the stage's cumulative metrics and push them; never raises."""
    stage = report.stage
    report.count("flywheel_stage_runs_total", 1, stage=stage, status=status)
    report.observe("flywheel_stage_duration_seconds", [duration_s], stage=stage)
    if status == "success":
        report.gauge("flywheel_stage_last_success_timestamp_seconds", time.time(), stage=stage)
    for operation, n in RETRIES.since(_RETRIES_SEEN).items():
        report.count("flywheel_retries_total", n, stage=stage, operation=operation)
    try:
        state = _fold(_load_state(store, stage), report)
    except StoreError as exc:  # metrics are never worth failing a stage for
        log.warning("metrics state unreadable for stage %s: %s", stage, exc)
        state = _fold({"counters": {}, "gauges": {}, "histograms": {}}, report)
    if pushgateway_url and not _push(state, stage, pushgateway_url):
        fails = state["counters"].setdefault("flywheel_metrics_push_failures_total", {})
        key = json.dumps(_labels({"stage": stage}))
        fails[key] = fails.get(key, 0.0) + 1
    try:
        store.put(metrics_key(stage), json.dumps(state).encode())
    except StoreError as exc:
        log.warning("metrics state not saved for stage %s: %s", stage, exc)
    return state


def _push(state: dict[str, Any], stage: str, url: str) -> bool:
    """Push ``state`` to the Pushgateway at ``url``; credentials in the URL
    (``http://user:password@pushgateway:9091``) are sent as HTTP basic auth, never logged."""
    from prometheus_client import push_to_gateway

    bare, handler = pushgateway_target(url)
    try:
        push_to_gateway(
            bare,
            job="flywheel",
            grouping_key={"stage": stage},
            registry=build_registry(state),
            timeout=3,
            handler=handler,
        )
        return True
    except Exception as exc:  # noqa: BLE001 - any push failure is logged and counted
        log.warning(
            "pushgateway %s unreachable for stage %s: %s",
            redact_url(url),
            stage,
            type(exc).__name__,
        )
        return False


def pushgateway_target(url: str) -> tuple[str, Any]:
    """``url`` without its credentials, and prometheus-client's push handler sending them as
    basic auth (its default handler when the URL carries none)."""
    from urllib.parse import unquote, urlsplit, urlunsplit

    from prometheus_client.exposition import basic_auth_handler, default_handler

    parts = urlsplit(url)
    if parts.username is None:
        return url, default_handler
    user, password = unquote(parts.username), unquote(parts.password or "")
    netloc = parts.netloc.rpartition("@")[2]
    bare = urlunsplit(parts._replace(netloc=netloc))

    def handler(
        url: str, method: str, timeout: float | None, headers: list[Any], data: bytes
    ) -> Any:
        return basic_auth_handler(url, method, timeout, headers, data, user, password)

    return bare, handler
