"""``flywheel pii-eval`` on a user's own labels (issue 43) with the real anonymiser: a file
labelled with Presidio's entity names is measured under ours, any other type as an identifier
that must not survive (never refused), and ``--clean FILE`` says which types fired on texts
without personal data, how often, and the precision per type that follows."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from deployments import pii_eval_command
from deployments.cli import main
from deployments.pii_eval_command import evaluate_file, exit_code
from infra.errors import ConfigError

pytestmark = pytest.mark.integration

IBAN = "DE89 3704 0044 0532 0130 00"


def _write(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _labelled(tmp_path: Path) -> Path:
    def line(text: str, *entities: tuple[str, str]) -> dict:
        return {"text": text, "entities": [{"type": t, "value": v} for t, v in entities]}

    return _write(
        tmp_path / "mine.jsonl",
        [
            line(f"Please wire the refund to {IBAN}.", ("IBAN_CODE", IBAN)),
            line("My passport number is 512345678.", ("US_PASSPORT", "512345678")),
            line("Driver license D1234567 was renewed.", ("US_DRIVER_LICENSE", "D1234567")),
            line(
                "Routing aside, the account number is 000123456789.",
                ("US_BANK_NUMBER", "000123456789"),
            ),
            line("Mail me at ann.lee@example.org", ("EMAIL_ADDRESS", "ann.lee@example.org")),
            line("My loyalty card is QX-77310-ZP, thanks", ("loyalty-id", "QX-77310-ZP")),
        ],
    )


def test_presidio_names_are_ours_and_other_types_are_identifiers(tmp_path: Path) -> None:
    report = evaluate_file(_labelled(tmp_path))
    summary = report.summary(show_values=False)
    assert summary["label_types_mapped"] == {
        "IBAN_CODE": "BANK_ACCOUNT",
        "US_BANK_NUMBER": "BANK_ACCOUNT",
        "US_DRIVER_LICENSE": "DRIVER_LICENSE",
        "US_PASSPORT": "PASSPORT",
    }
    assert report.values == {
        "BANK_ACCOUNT": 2,
        "PASSPORT": 1,
        "DRIVER_LICENSE": 1,
        "EMAIL_ADDRESS": 1,
        "LOYALTY_ID": 1,
    }
    assert summary["measured_as_identifier"] == ["LOYALTY_ID"]
    assert summary["recall_by_type"]["BANK_ACCOUNT"] >= 0.5  # the IBAN at least
    assert summary["recall_by_type"]["EMAIL_ADDRESS"] == 1.0
    # the loyalty number is an identifier the anonymiser has no recogniser for: a leak, and a
    # structured one, so --fail-on-leak structured fails on it
    leaked = {leak["type"] for leak in summary["leaked"]}
    assert "LOYALTY_ID" in leaked and summary["structured_leaks"] >= 1
    assert exit_code(report, "structured") == 1
    assert not [c for c in summary["type_confusions"] if c["type"] == "LOYALTY_ID"]


def test_clean_texts_give_precision_per_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = _write(
        tmp_path / "clean.jsonl",
        [
            {"text": "Our support line is open 9 to 5 on weekdays."},
            {"text": "Questions? Write to billing@example.com and we answer within a day."},
            {"text": "The newsletter goes out monthly."},
        ],
    )
    ns = argparse.Namespace(
        file=_labelled(tmp_path),
        clean=clean,
        language="auto",
        fail_on_leak=None,
        show_values=False,
        json=False,
    )
    assert pii_eval_command.run(ns) == 0
    out = capsys.readouterr().out
    assert "--clean: 1 of 3 texts altered (lines 2)" in out
    assert "fired on clean text EMAIL_ADDRESS   1 times in 1 texts" in out
    assert "precision EMAIL_ADDRESS" in out and "label IBAN_CODE counted as BANK_ACCOUNT" in out
    report = evaluate_file(ns.file, clean=clean).summary(show_values=False)
    assert report["clean_fired_by_type"]["EMAIL_ADDRESS"] == {"findings": 1, "texts": 1}
    assert report["precision_by_type"]["EMAIL_ADDRESS"] == 0.5  # one on a label, one not
    assert report["clean_file_texts"] == 3 and report["clean_file_altered_lines"] == [2]
    only_clean = evaluate_file(None, clean=clean).summary(show_values=False)
    assert only_clean["values"] == 0 and only_clean["clean_fired_by_type"]


def test_a_clean_file_with_labels_or_no_file_at_all_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match=r"mine.jsonl:1: a --clean file"):
        evaluate_file(None, clean=_labelled(tmp_path))
    assert main(["pii-eval"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "a labelled FILE, a --clean FILE, or both" in err
