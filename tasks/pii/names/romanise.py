"""Names written in Cyrillic or Greek script as people romanise them when they type them in
Latin letters, so the name lexicon (:func:`tasks.pii.names.lexicon`) holds the forms users
write ("Александр" -> "aleksandr", "Ελευθερία" -> "eleftheria")."""

from __future__ import annotations

import unicodedata

import regex as re

_CYRILLIC = dict(
    zip(
        "абвгдеёжзийклмнопрстуфхцчшщъыьэюяіїєґ",
        [
            "a",
            "b",
            "v",
            "g",
            "d",
            "e",
            "e",
            "zh",
            "z",
            "i",
            "y",
            "k",
            "l",
            "m",
            "n",
            "o",
            "p",
            "r",
            "s",
            "t",
            "u",
            "f",
            "kh",
            "ts",
            "ch",
            "sh",
            "shch",
            "_",
            "y",
            "_",
            "e",
            "yu",
            "ya",
            "i",
            "yi",
            "ye",
            "g",
        ],
        strict=True,
    )
)


def latin(name: str) -> str:
    """A Russian, Ukrainian or Bulgarian name as people romanise it ("Александр" ->
    "aleksandr"), so the romanised forms users type are in the lexicon."""
    return "".join(_CYRILLIC.get(c, c) for c in name.lower()).replace("_", "")


_GREEK = dict(
    zip(
        "αβγδεζηθικλμνξοπρσςτυφχψω",
        [
            "a",
            "v",
            "g",
            "d",
            "e",
            "z",
            "i",
            "th",
            "i",
            "k",
            "l",
            "m",
            "n",
            "x",
            "o",
            "p",
            "r",
            "s",
            "s",
            "t",
            "y",
            "f",
            "ch",
            "ps",
            "o",
        ],
        strict=True,
    )
)
# "αυ", "ευ": "av", "ev" before a voiced sound, "af", "ef" before a voiceless one
_GREEK_DIGRAPH = re.compile(r"([αε])υ(?=([θκξπστφχψ])?)")


def greek(name: str) -> str:
    """A Greek name as people romanise it ("Ελευθερία" -> "eleftheria", "Σταύρος" ->
    "stavros"), so the romanised forms users type are in the lexicon."""
    plain = "".join(c for c in unicodedata.normalize("NFD", name.lower()) if c.isalpha())
    plain = plain.replace("ου", "ou").replace("γγ", "ng")
    plain = _GREEK_DIGRAPH.sub(lambda m: _GREEK[m.group(1)] + ("f" if m.group(2) else "v"), plain)
    return "".join(_GREEK.get(c, c) for c in plain)
