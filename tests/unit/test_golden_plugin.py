"""A user's own domain (capitals of countries, ``tests/plugins/mypkg/capitals.py``) given only
by settings: the judges, the release gate, training's decontamination and ``prove``'s scoring
run on its golden set and verifier, and none of them loads the calculator demo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from infra.answers import Answer
from infra.settings import ReleaseSettings, RewardSettings, Settings

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
ROOT = Path(__file__).resolve().parents[2]
REWARD = {
    "golden": PLUGINS / "mypkg" / "capitals.jsonl",
    "verifier": "mypkg.capitals:capital",
    "golden_match": "mypkg.capitals:asks_a_golden_country",
}


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.syspath_prepend(str(PLUGINS))
    return Settings(home=tmp_path, reward=RewardSettings(**REWARD))


class Atlas:
    """Answers from the tool result in its prompt; wrong (Osaka) on the items it misses."""

    lm = None

    def __init__(self, version: str, miss: Sequence[int] = ()) -> None:
        self.version, self.miss = version, set(miss)

    def answer(self, requests: Sequence[list[dict]], *, max_tokens: int) -> list[Answer]:
        out = []
        for i, messages in enumerate(requests):
            capital = re.sub(r".*the capital is ", "", str(messages[-1]["content"]))
            out.append(Answer("Osaka" if i in self.miss else f"It is {capital}.", 0.01))
        return out


def test_the_judge_is_the_verifier_the_settings_name(settings: Settings) -> None:
    from tasks.reward import ScoreItem, Scorer, judge_id

    scorer = Scorer(settings)
    right, wrong = scorer.score(
        [
            ScoreItem(question="What is the capital of Peru?", contexts=[], answer="Lima"),
            ScoreItem(question="What is the capital of Peru?", contexts=[], answer="Osaka"),
        ]
    )
    assert (right.judge, wrong.judge) == (1.0, 0.0)
    assert judge_id(settings).startswith("plugin:mypkg.capitals:capital:")


def test_the_gate_runs_on_the_settings_golden_set(settings: Settings) -> None:
    from tasks.golden import settings_golden
    from tasks.release.gate import Decision, run_gate
    from tasks.reward import Scorer

    items = settings_golden(settings.reward)
    assert [it.item_id for it in items] == ["c1", "c2", "c3", "c4"]
    result = run_gate(
        items,
        baseline=Atlas("v0", miss=[1, 3]),
        candidate=Atlas("v1"),
        scorer=Scorer(settings),
        policy=ReleaseSettings(n_bootstrap=200),
    )
    assert result.decision == Decision.MANUAL_REVIEW  # 4 items: too few for a verdict
    check = next(c for c in result.checks if c.name == "golden_verifier")
    assert check.status == "pass" and "50.0% -> 100.0%" in check.detail
    assert [p.slice for p in result.items] == ["europe", "asia", "africa", "americas"]
    assert result.test.mean_candidate > result.test.mean_baseline


def test_prove_and_training_use_the_settings_golden_set_and_verifier(settings: Settings) -> None:
    from tasks.golden import settings_golden
    from tasks.prove.arms import golden_scores, oracle_rows
    from tasks.train.pairs import GoldenFilter, Selection

    golden = settings_golden(settings.reward)
    texts = ["Paris", "Osaka", "Nairobi, I think", "Lima or Tokyo"]
    assert golden_scores(golden, texts, reward=settings.reward) == [1.0, 0.0, 1.0, 0.0]
    prompt = {"prompt": "Q: capital of Kenya?", "question": "capital of Kenya?", "contexts": []}
    sel = Selection(pairs=[], sft=[], prompts=[prompt], snapshot_id=None, windows=[])
    [row] = oracle_rows(sel, reward=settings.reward)
    assert row["completion"].strip() == "Nairobi"
    contaminated = GoldenFilter.from_settings(settings.reward)
    assert contaminated("Hi! Tell me the capital city of France")  # the matcher
    assert contaminated("Hello <PERSON>, what is the capital of France?")  # a near-duplicate
    assert not contaminated("What is the capital of Chile?")


GATE_WITHOUT_DEMO = """
import sys
from infra.settings import ReleaseSettings, RewardSettings, Settings
from tasks.golden import settings_golden
from tasks.release.gate import run_gate
from tasks.reward import Scorer
from tests.unit.test_golden_plugin import REWARD, Atlas

settings = Settings(reward=RewardSettings(**REWARD))
result = run_gate(settings_golden(settings.reward), baseline=Atlas("v0", miss=[0]),
    candidate=Atlas("v1"), scorer=Scorer(settings), policy=ReleaseSettings(n_bootstrap=50))
print(result.decision.value, sorted(m for m in sys.modules if m.startswith("tasks.demo")))
"""


def test_the_platform_never_loads_the_demo_when_the_settings_name_another_domain(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{PLUGINS}"}
    env["FLYWHEEL_HOME"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", GATE_WITHOUT_DEMO],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["MANUAL_REVIEW", "[]"]
