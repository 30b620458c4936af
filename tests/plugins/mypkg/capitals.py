"""A user's own domain, unrelated to the calculator: capitals of countries. A golden set
(``capitals.jsonl`` beside this file), its verifier and its decontamination matcher, plugged in
and the questions of ``flywheel prove``'s traffic, plugged in through settings only::

    FLYWHEEL_REWARD__GOLDEN=tests/plugins/mypkg/capitals.jsonl
    FLYWHEEL_REWARD__VERIFIER=mypkg.capitals:capital
    FLYWHEEL_REWARD__GOLDEN_MATCH=mypkg.capitals:asks_a_golden_country
    FLYWHEEL_REWARD__QUESTIONS=mypkg.capitals:sample_question
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).with_name("capitals.jsonl")
CAPITALS = {
    "france": "Paris",
    "japan": "Tokyo",
    "kenya": "Nairobi",
    "peru": "Lima",
    "chile": "Santiago",
    "egypt": "Cairo",
    "italy": "Rome",
}
GOLDEN_COUNTRIES = {"france", "japan", "kenya", "peru"}
_COUNTRY = re.compile(r"capital (?:city )?of ([a-z]+)", re.IGNORECASE)


def _country(question: str) -> str | None:
    found = _COUNTRY.search(question)
    return found.group(1).lower() if found else None


def capital(trace: Any) -> dict[str, Any]:
    """1.0 when the answer names the right capital and no other word but filler, 0.0 when it
    does not; None for a question about no known country. The capital is the reference."""
    reference = trace.reference or CAPITALS.get(_country(trace.question) or "")
    if reference is None:
        return {"score": None, "reference": None}
    words = re.findall(r"[a-z]+", (trace.answer or "").lower())
    named = [w for w in words if w.capitalize() in CAPITALS.values()]
    return {"score": 1.0 if named == [reference.lower()] else 0.0, "reference": reference}


def asks_a_golden_country(question: str) -> bool:
    """True when the question asks the capital of a golden country, in any phrasing."""
    return _country(question) in GOLDEN_COUNTRIES


def sample_question(rng: random.Random) -> str:
    """A question about the capital of a country outside the golden set (prove's traffic)."""
    country = rng.choice(sorted(set(CAPITALS) - GOLDEN_COUNTRIES))
    return f"What is the capital of {country.capitalize()}?"
