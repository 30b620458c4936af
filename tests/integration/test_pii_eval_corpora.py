"""``flywheel pii-eval`` on the project's hand-written corpora (tests/data/pii_handwritten):
messages with personal data lose every structured identifier, names and addresses go at
>= 95 %, and at most 5 % of the messages without personal data come back altered."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

DATA = Path(__file__).resolve().parents[1] / "data" / "pii_handwritten"
CORPORA = ["en_pii.jsonl", "en_clean.jsonl", "ko_pii.jsonl", "ko_clean.jsonl"]


def _eval(name: str) -> tuple[int, dict]:
    """What ``flywheel pii-eval FILE --json --fail-on-leak structured`` computes and exits
    with, in this process (the anonymiser built once per worker); the command itself, as a
    process, is tested below."""
    from deployments.pii_eval_command import evaluate_file, exit_code

    report = evaluate_file(DATA / name)
    return exit_code(report, "structured"), report.summary(show_values=False)


@pytest.mark.parametrize("name", [c for c in CORPORA if (DATA / c).exists()])
def test_hand_written_corpus(name: str) -> None:
    rc, report = _eval(name)
    assert report["structured_leaks"] == 0, report["leaked"]
    assert rc == 0
    recall = report["recall_by_type"]
    assert recall.get("PERSON", 1.0) >= 0.95, recall
    assert recall.get("ADDRESS", 1.0) >= 0.95, recall
    if report["clean_texts"]:
        assert report["clean_altered_rate"] <= 0.05, report["clean_altered_lines"]


def test_fail_on_leak_exits_non_zero_and_values_are_shown_only_when_asked(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mine.jsonl"
    lines = [
        {
            "text": "my passport number is M70689098",
            "entities": [{"type": "PASSPORT", "value": "M70689098"}],
        },
        {"text": "the vault combination", "entities": [{"type": "SECRET", "value": "combination"}]},
        {"text": "my Pixel 7a case cracked", "entities": []},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    base = [sys.executable, "-m", "deployments.cli", "pii-eval", str(path)]
    done = subprocess.run(  # noqa: S603 - our own CLI
        [*base, "--fail-on-leak"], capture_output=True, text=True, env=env, cwd=root
    )
    assert done.returncode == 1
    assert (
        "line     2  SECRET" in done.stdout and "combination" not in done.stdout.split("SECRET")[1]
    )
    assert "recall PASSPORT" in done.stdout and "altered: 0 of 1" in done.stdout
    shown = subprocess.run(  # noqa: S603 - our own CLI
        [*base, "--json", "--show-values"], capture_output=True, text=True, env=env, cwd=root
    )
    report = json.loads(shown.stdout.strip().splitlines()[-1])
    assert shown.returncode == 0
    assert report["leaked"] == [{"line": 2, "type": "SECRET", "value": "combination"}]
    assert report["recall_by_type"] == {"PASSPORT": 1.0, "SECRET": 0.0}
