from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from infra.settings import RewardSettings
from tasks import golden
from tasks.demo import domain


def test_repo_golden_set_matches_its_manifest() -> None:
    listed = golden.verify_manifest()
    assert domain.GOLDEN_FILE in listed
    assert len(golden.load_golden()) >= 300


@pytest.fixture
def golden_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "golden"
    shutil.copytree(golden.GOLDEN_DIR, dest)
    return dest


def test_an_edited_item_fails_the_manifest(golden_copy: Path) -> None:
    path = golden_copy / domain.GOLDEN_FILE
    path.write_text(path.read_text().replace('"reference": "117"', '"reference": "118"', 1))
    with pytest.raises(ValueError, match="does not match"):
        golden.verify_manifest(golden_copy)


def test_an_unlisted_or_missing_file_fails_the_manifest(golden_copy: Path) -> None:
    (golden_copy / "extra.jsonl").write_text("{}\n")
    with pytest.raises(ValueError, match="not in MANIFEST"):
        golden.verify_manifest(golden_copy)
    (golden_copy / "extra.jsonl").unlink()
    (golden_copy / domain.GOLDEN_FILE).unlink()
    with pytest.raises(ValueError, match="missing"):
        golden.verify_manifest(golden_copy)


def test_a_user_golden_set_replaces_the_demo_one(tmp_path: Path) -> None:
    """The README's recipe: own jsonl files + write_manifest -> loads and verifies."""
    own = tmp_path / "mine"
    own.mkdir()
    (own / "support.jsonl").write_text(
        '{"item_id": "s1", "question": "Refund window?", "contexts": ["Refunds: 30 days"],'
        ' "reference": "30 days", "slice": "billing"}\n'
    )
    golden.write_manifest(own)
    assert golden.verify_manifest(own) == {
        "support.jsonl": (own / "MANIFEST").read_text().split()[0]
    }
    [item] = golden.load_golden(own)
    assert (item.item_id, item.slice, item.reference) == ("s1", "billing", "30 days")
    assert golden.verified_scores([item], ["30 days."], reward=RewardSettings()) == [1.0]


def test_malformed_golden_lines_are_rejected_with_the_line_number(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"item_id": "a", "question": "q", "reference": "1"}\n{"question": "q"}\n')
    with pytest.raises(ValueError, match="line 2"):
        golden.load_golden(bad)
