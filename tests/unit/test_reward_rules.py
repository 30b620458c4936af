"""Reward rules a user states (issue 16): required components, plug-in verifiers (also as
GRPO's reward), references for context recall, and feedback as users give it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from infra.errors import ConfigError
from infra.settings import FeedbackSettings, RewardSettings, Settings, get_settings
from infra.traces.mapping import feedback_value
from tasks.feedback import apply_feedback
from tasks.reward import ScoreItem, Scorer, reward_config_hash, unmet_requirements
from tasks.train.methods import grpo_reward

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
EXPECTED = '{"order": 17, "status": "shipped"}'


@pytest.fixture
def plugin_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))


def _json_item(answer: str, workload: str = "default") -> ScoreItem:
    return ScoreItem(
        question="Status of order 17 as JSON?",
        contexts=[EXPECTED],
        answer=answer,
        workload=workload,
    )


def test_verifier_from_settings_scores_traces_and_gives_the_reference(
    plugin_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLYWHEEL_REWARD__VERIFIER", "mypkg.checks:exact_json")
    get_settings.cache_clear()
    scorer = Scorer(get_settings())
    right, reordered, wrong, prose = scorer.score(
        [
            _json_item(EXPECTED),
            _json_item('{"status":"shipped","order":17}'),
            _json_item('{"order": 17, "status": "lost"}'),
            _json_item("It shipped."),
        ]
    )
    assert [b.judge for b in (right, reordered, wrong, prose)] == [1.0, 1.0, 0.0, 0.0]
    assert right.judge_id.startswith("plugin:mypkg.checks:exact_json")
    # the verifier's reference makes context recall applicable (the context holds it)
    assert right.context_recall == 1.0 and "context_recall" not in right.missing
    assert right.total > wrong.total
    default = reward_config_hash(Settings(reward=RewardSettings()))
    assert scorer.config_hash != default  # the verifier is part of the reward's identity


def test_verifier_drives_grpo_reward(plugin_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYWHEEL_REWARD__VERIFIER", "mypkg.checks:exact_json")
    get_settings.cache_clear()
    reward = grpo_reward(get_settings())
    scores = reward(
        prompts=["p"] * 3,
        completions=[EXPECTED, '{"order": 17, "status": "lost"}', "no idea"],
        question=["Status of order 17 as JSON?"] * 3,
        contexts=[[EXPECTED]] * 3,
    )
    assert scores[0] == pytest.approx(1.0)
    assert scores[1] is not None and scores[2] is not None
    assert scores[0] > scores[1] and scores[1] < 0.5 and scores[2] < 0.5


def test_verifiers_are_chosen_per_workload(
    plugin_path: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLYWHEEL_WORKLOADS", '["orders"]')
    monkeypatch.setenv(
        "FLYWHEEL_REWARD__VERIFIERS", json.dumps({"orders": "mypkg.checks:exact_json"})
    )
    get_settings.cache_clear()
    orders, other = Scorer(get_settings()).score(
        [_json_item(EXPECTED, workload="orders"), _json_item(EXPECTED)]
    )
    assert orders.judge == 1.0 and orders.eligible
    # the default workload keeps the demo calculator, which cannot check this question:
    # reported as not applicable, and without feedback the trace is not training-eligible
    assert other.judge is None and other.judge_status == "not_applicable"
    assert "judge" in other.not_applicable and not other.eligible
    assert other.ineligible_reason() == (
        "required judge|feedback: judge verifier:arith-add-2d/v1 not_applicable, no user feedback"
    )


def test_a_verifier_that_cannot_be_loaded_is_one_clear_line(monkeypatch) -> None:
    monkeypatch.setenv("FLYWHEEL_REWARD__VERIFIER", "nopkg.checks:exact_json")
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match="cannot import 'nopkg.checks'") as info:
        Scorer(get_settings())
    assert "\n" not in str(info.value)
    monkeypatch.setenv("FLYWHEEL_REWARD__VERIFIER", "not a spec!")
    get_settings.cache_clear()
    with pytest.raises(ConfigError, match="FLYWHEEL_REWARD__VERIFIER"):
        get_settings()


def test_required_components_make_traces_ineligible_not_reweighted() -> None:
    assert unmet_requirements(["judge|feedback"], present={"faithfulness"}, user_feedback=False)
    assert not unmet_requirements(["judge|feedback"], present={"judge"}, user_feedback=False)
    # neutral feedback filled in for none is present as a value but is not the user's
    assert unmet_requirements(["judge|feedback"], present={"feedback"}, user_feedback=False)
    assert not unmet_requirements(["judge|feedback"], present=set(), user_feedback=True)
    both = ["judge", "faithfulness"]
    assert unmet_requirements(both, present={"judge"}, user_feedback=True) == ["faithfulness"]
    with pytest.raises(ValueError, match="unknown reward component 'judgement'"):
        Settings(reward={"required": ["judgement|feedback"]})  # type: ignore[arg-type]
    hashes = {
        reward_config_hash(Settings(reward={"required": r}))  # type: ignore[arg-type]
        for r in (["judge|feedback"], ["judge"], [])
    }
    assert len(hashes) == 3  # the rules are part of the reward config hash


def test_thumbs_down_vetoes_and_feedback_satisfies_the_requirement() -> None:
    scorer = Scorer(Settings())
    item = ScoreItem(question="What is 2+3?", contexts=["calculator: 2 + 3 = 5"], answer="5")
    up, down = scorer.score(
        [
            ScoreItem(**{**item.__dict__, "feedback": 1}),
            ScoreItem(**{**item.__dict__, "feedback": -1}),
        ]
    )
    assert up.total == pytest.approx(1.0) and up.eligible
    assert down.total == 0.0 and down.judge == 1.0 and down.feedback == 0.0


@pytest.mark.parametrize(
    ("score", "value"),
    [
        ({"dataType": "NUMERIC", "value": 0.2}, 0),  # 0.2 is not a thumbs-up
        ({"dataType": "NUMERIC", "value": 0.9}, 1),
        ({"dataType": "NUMERIC", "value": -0.7}, -1),
        ({"dataType": "CATEGORICAL", "value": 1, "stringValue": "Positive"}, 1),
        ({"dataType": "CATEGORICAL", "stringValue": "negative"}, -1),
        ({"dataType": "CATEGORICAL", "value": "meh"}, None),
        ({"dataType": "BOOLEAN", "value": False}, -1),
    ],
)
def test_feedback_as_users_give_it(score: dict[str, object], value: int | None) -> None:
    assert feedback_value(score, FeedbackSettings()) == value


def test_feedback_thresholds_and_categories_are_settings() -> None:
    stars = FeedbackSettings(up_at=4, down_at=2, categories={"great": 1})
    assert [feedback_value({"dataType": "NUMERIC", "value": v}, stars) for v in (5, 3, 1)] == [
        1,
        0,
        -1,
    ]
    assert feedback_value({"dataType": "CATEGORICAL", "stringValue": "GREAT"}, stars) == 1
    assert feedback_value({"dataType": "CATEGORICAL", "stringValue": "positive"}, stars) is None


def test_late_feedback_changes_only_what_changed() -> None:
    table = pa.table(
        {"trace_id": ["a", "b", "c"], "feedback": pa.array([None, 1, -1], type=pa.int8())}
    )
    updated, changed = apply_feedback(table, {"a": -1, "b": 1, "x": 1})
    assert changed == 1 and updated.column("feedback").to_pylist() == [-1, 1, -1]
    assert updated.schema == table.schema
    again, none = apply_feedback(updated, {"a": -1})
    assert none == 0 and again.equals(updated)
