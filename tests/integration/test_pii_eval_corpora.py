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
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    cmd = [sys.executable, "-m", "deployments.cli", "pii-eval", str(DATA / name), "--json"]
    done = subprocess.run(  # noqa: S603 - our own CLI
        [*cmd, "--fail-on-leak", "structured"], capture_output=True, text=True, env=env, cwd=root
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


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
