"""Builds the hand-written PII corpora (``*.jsonl`` beside this file) from ``src/*.txt``.

Each source line is one message written by hand; ``\\n`` stands for a line break and every
personal value is marked ``⟦CODE:value⟧`` (codes below). Lines of ``*_clean_*.txt`` files
carry no marks. The committed artefacts are the JSONL files; rerun after editing a source:

    .venv/bin/python tests/data/pii_handwritten/build.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

CODES = {
    "P": "PERSON",
    "E": "EMAIL_ADDRESS",
    "PH": "PHONE_NUMBER",
    "A": "ADDRESS",
    "DOB": "DATE_OF_BIRTH",
    "CC": "CREDIT_CARD",
    "BA": "BANK_ACCOUNT",
    "SSN": "US_SSN",
    "RRN": "KR_RRN",
    "PP": "PASSPORT",
    "DL": "DRIVER_LICENSE",
    "MED": "MEDICAL_ID",
    "SEC": "SECRET",
    "IP": "IP_ADDRESS",
    "NINO": "UK_NINO",
    "FRN": "KR_FRN",
    "PLATE": "KR_CAR_PLATE",
    "BRN": "KR_BRN",
}
MARK = re.compile(r"⟦([A-Z]+):(.+?)⟧", re.S)  # a value may run over a line break
HERE = Path(__file__).parent


def parse(line: str) -> dict[str, object]:
    """One source line -> ``{"text", "entities"}``."""
    line = line.replace("\\n", "\n")
    entities = [{"type": CODES[m.group(1)], "value": m.group(2)} for m in MARK.finditer(line)]
    return {"text": MARK.sub(lambda m: m.group(2), line), "entities": entities}


def build(prefix: str) -> None:
    """``src/<prefix>_*.txt`` -> ``<prefix>.jsonl``."""
    rows = []
    for src in sorted((HERE / "src").glob(f"{prefix}_*.txt")):
        rows += [parse(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
    with (HERE / f"{prefix}.jsonl").open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    for corpus in ("en_pii", "en_clean", "ko_pii", "ko_clean"):
        build(corpus)
