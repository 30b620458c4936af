"""Human review end to end: curate queues 2 % plus the edge cases (and pushes them to a Langfuse
annotation queue), ``flywheel review export`` / ``import`` round-trip through a file a person
fills in, the Spearman metric the import pushes makes the alert fire in ``promtool test rules``,
and labelled traces train with the human score."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from deployments import cli
from infra.catalog import open_catalog, scan
from infra.keys import metrics_key
from infra.settings import get_settings
from infra.store import open_store
from tests.data.pii_corpus import generate, plant_window
from tests.fakes.langfuse import FakeLangfuseServer

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
ROOT = Path(__file__).resolve().parents[2]


def _queue(settings) -> list[dict]:
    rows = scan(open_catalog(settings), "review_queue").to_pylist()
    return sorted(rows, key=lambda r: (r["reason"], r["trace_id"]))


def test_curate_queues_a_sample_and_the_edge_cases_and_pushes_them_to_langfuse(
    prefect_api, flywheel_home, monkeypatch
) -> None:
    from flows.curate import curate

    with FakeLangfuseServer() as lf:
        queue_id = lf.add_annotation_queue("flywheel review")
        monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
        monkeypatch.setenv("FLYWHEEL_REVIEW__LANGFUSE_QUEUE_ID", queue_id)
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__HOST", lf.url)
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__PUBLIC_KEY", lf.public_key)
        monkeypatch.setenv("FLYWHEEL_LANGFUSE__SECRET_KEY", lf.secret_key)
        get_settings.cache_clear()
        settings = get_settings()
        plant_window(open_store(settings), T0, generate(60, seed=3))
        curate(window_start=T0)
        first = _queue(settings)
        eligible = [
            r
            for r in scan(open_catalog(settings), "training_examples").to_pylist()
            if r["eligible_as"] == "train"
        ]
        random_part = [r for r in first if r["reason"] == "random"]
        assert len(random_part) == max(1, -(-len(eligible) * 2 // 100))  # ceil(2 %)
        assert {r["trace_id"] for r in random_part} <= {r["trace_id"] for r in eligible}
        pushed = {i["objectId"] for i in lf.queue_items}
        assert pushed == {r["trace_id"] for r in first}
        assert {i["objectType"] for i in lf.queue_items} == {"TRACE"}
        curate(window_start=T0)  # a rerun: same sample, nothing queued twice
        assert [r["trace_id"] for r in _queue(settings)] == [r["trace_id"] for r in first]
        assert len(lf.queue_items) == len(pushed)


def _seed_queue(settings, n: int = 12) -> list[dict]:
    """Queue items as curate writes them (anonymised rows), rewards rising with i."""
    from infra.settings import ReviewSettings
    from tasks.review import queue_window, sample_for_review

    rows = [
        {
            "trace_id": f"t{i:03d}",
            "eligible_as": "train",
            "reward": 0.5 + i / 40,
            "reward_feedback": 1.0,
            "question": f"What is {i} + 1?",
            "answer": str(i + 1),
            "model_version": "v0",
        }
        for i in range(n)
    ]
    policy = ReviewSettings(sample_rate=1.0, edge_rate=0.0)
    items = sample_for_review(rows, window="2026-11-22T10:00:00Z", policy=policy)
    queue_window(open_catalog(settings), window="2026-11-22T10:00:00Z", rows=items)
    return items


def _promtool_agrees(gauges: dict[str, float], tmp_path: Path, *, fires: bool) -> bool:
    """Feed the pushed gauges to ``promtool test rules`` with the real rule file: True when
    RewardHumanCorrelationLow fires (with the Spearman and the sample size in its summary)
    exactly when ``fires`` says."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing (Debian: prometheus)"
    series = [
        {"series": f'{name}{{job="flywheel",stage="review"}}', "values": f"{value}x30"}
        for name, value in gauges.items()
    ]
    rules = yaml.safe_load((ROOT / "infra/prometheus/rules.yml").read_text())
    rule = next(
        r
        for g in rules["groups"]
        for r in g["rules"]
        if r.get("alert") == "RewardHumanCorrelationLow"
    )
    rho, n = gauges["flywheel_reward_human_spearman"], gauges["flywheel_reward_human_samples"]
    annotations = {
        **rule["annotations"],
        "summary": f"Reward-human Spearman {rho:.2f} is below 0.7 ({n:.0f} labels)",
    }
    expected = [{"exp_labels": {"severity": "warning"}, "exp_annotations": annotations}]
    test = {
        "rule_files": [str(ROOT / "infra/prometheus/rules.yml")],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": "10m",
                        "alertname": "RewardHumanCorrelationLow",
                        "exp_alerts": expected if fires else [],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "review_test.yml"
    path.write_text(yaml.safe_dump(test))
    out = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    return out.returncode == 0


def test_export_import_round_trip_and_the_spearman_alert(flywheel_home, tmp_path, capsys) -> None:
    settings = get_settings()
    items = _seed_queue(settings)
    out = tmp_path / "review.csv"
    assert cli.main(["review", "export", str(out)]) == 0
    with out.open() as f:
        exported = list(csv.DictReader(f))
    assert [r["trace_id"] for r in exported] == [i["trace_id"] for i in items]
    assert all(r["human_score"] == "" for r in exported)
    # a reviewer disagrees: the higher the reward, the worse they find the answer
    for i, row in enumerate(exported):
        row["human_score"] = str(round(1 - i / len(exported), 3)) if i < 11 else ""
        row["reviewer"] = "rev-1"
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(exported[0]))
        writer.writeheader()
        writer.writerows(exported)
    capsys.readouterr()
    assert cli.main(["review", "import", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["labels"] == 11 and summary["unlabelled"] == 1
    assert summary["samples"] == 11 and summary["spearman"] == pytest.approx(-1.0)
    labelled = {r["trace_id"]: r for r in _queue(settings) if r["labelled_at"] is not None}
    assert len(labelled) == 11 and labelled["t000"]["human_score"] == 1.0
    assert labelled["t000"]["reviewer"] == "rev-1"
    # the pushed metric, as Prometheus would read it from the Pushgateway
    state = json.loads(open_store(settings).get(metrics_key("review")))
    gauges = {name: next(iter(series.values())) for name, series in state["gauges"].items()}
    assert gauges["flywheel_reward_human_samples"] == 11
    assert _promtool_agrees(gauges, tmp_path, fires=True)
    # agreeing labels on the same traces: the correlation recovers and the alert stays quiet
    agree = tmp_path / "agree.jsonl"
    agree.write_text(
        "".join(
            json.dumps({"trace_id": i["trace_id"], "human_score": min(1.0, i["reward"])}) + "\n"
            for i in items
        )
    )
    assert cli.main(["review", "import", str(agree)]) == 0
    state = json.loads(open_store(settings).get(metrics_key("review")))
    gauges = {name: next(iter(series.values())) for name, series in state["gauges"].items()}
    assert gauges["flywheel_reward_human_spearman"] > 0.9
    assert _promtool_agrees(gauges, tmp_path, fires=False)
    # every item is labelled now: the default export lists only what is left to review
    assert cli.main(["review", "export", str(tmp_path / "left.jsonl")]) == 0
    assert (tmp_path / "left.jsonl").read_text() == ""


def test_bad_review_files_are_refused_in_one_line(flywheel_home, tmp_path, capsys) -> None:
    _seed_queue(get_settings(), n=3)
    cases = {
        "scores.csv": ("trace_id,human_score\nt000,1.5\n", "line 2: human_score 1.5 is outside"),
        "words.csv": ("trace_id,human_score\nt000,good\n", "line 2: human_score 'good'"),
        "nohead.csv": ("id,score\nt000,1\n", "the header needs the columns"),
        "ghost.jsonl": ('{"trace_id": "nope", "human_score": 1}\n', "not in the review queue"),
        "broken.jsonl": ("{not json\n", "line 1: not a JSON object"),
    }
    for name, (text, needle) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        capsys.readouterr()
        assert cli.main(["review", "import", str(path)]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("flywheel review: error: ") and needle in err, (name, err)
        assert err.count("\n") == 1
    assert all(r["labelled_at"] is None for r in _queue(get_settings()))
    assert cli.main(["review", "import", str(tmp_path / "missing.csv")]) == 2


def test_labelled_traces_train_with_the_human_score(flywheel_home) -> None:
    from tasks.review import Label, override_rewards, store_labels

    settings = get_settings()
    _seed_queue(settings, n=4)
    catalog = open_catalog(settings)
    store_labels(catalog, [Label(trace_id="t001", human_score=0.0, reviewer=None)])
    rows = [{"trace_id": f"t{i:03d}", "reward": 0.9} for i in range(4)]
    assert override_rewards(catalog, rows) == 1
    assert [r["reward"] for r in rows] == [0.9, 0.0, 0.9, 0.9]


def test_the_langfuse_queue_client_pages_and_never_queues_a_trace_twice() -> None:
    from infra.errors import SourceError
    from infra.traces.langfuse_queue import LangfuseReviewQueue

    with FakeLangfuseServer() as lf:
        qid = lf.add_annotation_queue("flywheel review")
        keys = {"public_key": lf.public_key, "secret_key": lf.secret_key}
        queue = LangfuseReviewQueue(host=lf.url, queue_id=qid, page_size=2, **keys)
        assert queue.add_traces(["a", "b", "c"]) == 3
        assert queue.add_traces(["a", "d", "d"]) == 1  # over two pages of existing items
        assert sorted(i["objectId"] for i in queue.items()) == ["a", "b", "c", "d"]
        lf.complete_item("b")
        assert [i["objectId"] for i in queue.items(status="COMPLETED")] == ["b"]
        missing = LangfuseReviewQueue(host=lf.url, queue_id="nope", **keys)
        with pytest.raises(SourceError, match="answered 404"):
            missing.add_traces(["a"])
