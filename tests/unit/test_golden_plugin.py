"""A user's own domain (capitals of countries, ``tests/plugins/mypkg/capitals.py``) given only
by settings: the judges, the release gate, training's decontamination and ``prove``'s traffic
and scoring run on its questions, golden set and verifier, and none of them loads the
calculator demo."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from infra.serving.answers import Answer
from infra.serving.local_lm import Generation
from infra.settings import ReleaseSettings, RewardSettings, Settings

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
ROOT = Path(__file__).resolve().parents[2]
REWARD = {
    "golden": PLUGINS / "mypkg" / "capitals.jsonl",
    "verifier": "mypkg.capitals:capital",
    "golden_match": "mypkg.capitals:asks_a_golden_country",
    "questions": "mypkg.capitals:sample_question",
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
    from tasks.release.gate.gate import Decision, run_gate
    from tasks.release.gate.gate_inputs import GateInputs
    from tasks.reward import Scorer

    items = settings_golden(settings.reward)
    assert [it.item_id for it in items] == ["c1", "c2", "c3", "c4"]
    result = run_gate(
        GateInputs(
            items=items,
            baseline=Atlas("v0", miss=[1, 3]),
            candidate=Atlas("v1"),
            scorer=Scorer(settings),
            policy=ReleaseSettings(n_bootstrap=200),
        )
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


class Geographer:
    """Names the right capital at the lowest temperature, Osaka above it."""

    def generate_batch(
        self, prompts: list[str], *, temperature: float, max_new_tokens: int, seed: int
    ) -> list[Generation]:
        from mypkg.capitals import CAPITALS  # type: ignore[import-not-found]

        def answer(prompt: str) -> str:
            country = re.findall(r"capital of ([A-Z][a-z]+)", prompt)[-1].lower()
            return CAPITALS[country] if temperature < 1.0 else "Osaka"

        return [Generation(text=answer(p), tokens_in=8, tokens_out=1) for p in prompts]


def test_prove_traffic_asks_the_questions_the_settings_name(settings: Settings) -> None:
    from tasks.prove.sources import sample_questions
    from tasks.prove.traffic import build_traffic

    questions = sample_questions(settings.reward, 30, seed=4)
    assert [q.question for q in questions] == [
        q.question for q in sample_questions(settings.reward, 30, seed=4)
    ]
    asked = {q.question for q in questions}
    assert asked <= {f"What is the capital of {c}?" for c in ("Chile", "Egypt", "Italy")}
    traffic = build_traffic(
        Geographer(), questions, settings=settings, temperatures=[0.7, 1.3], seed=0
    )
    assert {r["question"] for r in traffic.rows} == asked
    assert traffic.correct_share == 0.5  # the capitals verifier scored every answer
    assert traffic.selection.pairs
    assert all(p["rejected"].strip() == "Osaka" for p in traffic.selection.pairs)


GATE_WITHOUT_DEMO = """
import sys
from infra.settings import ReleaseSettings, RewardSettings, Settings
from tasks.golden import settings_golden
from tasks.release.gate.gate import run_gate
from tasks.release.gate.gate_inputs import GateInputs
from tasks.reward import Scorer
from tests.unit.test_golden_plugin import REWARD, Atlas

settings = Settings(reward=RewardSettings(**REWARD))
result = run_gate(GateInputs(items=settings_golden(settings.reward), baseline=Atlas("v0", miss=[0]),
    candidate=Atlas("v1"), scorer=Scorer(settings), policy=ReleaseSettings(n_bootstrap=50)))
print(result.decision.value, sorted(m for m in sys.modules if m.startswith("tasks.demo")))
"""


PROVE_WITHOUT_DEMO = """
import sys
import flows.prove
from infra.settings import get_settings
from tasks.prove.sources import sample_questions

[q] = sample_questions(get_settings().reward, 1, seed=0)
print(q.question.startswith("What is the capital of"),
    sorted(m for m in sys.modules if m.startswith("tasks.demo")))
"""


def python(script: str, home: Path, **env: str) -> list[str]:
    """What ``script`` prints, run in a fresh interpreter that sees the plug-in package."""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": f"{ROOT}{os.pathsep}{PLUGINS}",
            "FLYWHEEL_HOME": str(home),
            **env,
        },
        cwd=home,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_the_platform_never_loads_the_demo_when_the_settings_name_another_domain(
    tmp_path: Path,
) -> None:
    assert python(GATE_WITHOUT_DEMO, tmp_path) == ["MANUAL_REVIEW", "[]"]
    questions = "mypkg.capitals:sample_question"
    assert python(PROVE_WITHOUT_DEMO, tmp_path, FLYWHEEL_REWARD__QUESTIONS=questions) == [
        "True",
        "[]",
    ]


# the only platform modules that may import the embedded demo by name in an import statement
DEMO_IMPORTERS = {"flows/loop.py", "deployments/commands.py"}


def test_only_the_loop_and_the_demo_commands_import_the_demo() -> None:
    importers = set()
    for folder in ("flows", "tasks", "deployments", "infra"):
        for path in (ROOT / folder).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("tasks/demo/"):
                continue
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [f"{node.module}.{a.name}" for a in node.names]
                else:
                    continue
                if any(n == "tasks.demo" or n.startswith("tasks.demo.") for n in names):
                    importers.add(rel)
    assert importers <= DEMO_IMPORTERS
