"""Lists of titles read as people: films, games, books and products named in a row and then
sold together ("Halo Infinite, Forza Horizon II and Gears Tactics are on the bundle", "Mad
Max, Rambo III and Total Recall are in the 4K box set"). Capitalised two-word titles look
like full names to the model; what the list is said to be (in a bundle, a box set, on sale,
some per cent off) is what a list of people never is."""

from __future__ import annotations

import regex as re

from tasks.pii.lexicon import alternatives

# one title: capitalised words, a sequel's numeral, small joining words ("Lord of the Rings")
_ITEM = (
    r"\p{Lu}[\p{L}'’:.-]*(?:[ \t]+(?:\p{Lu}[\p{L}'’:.-]*|[IVX]{1,4}|\d{1,2}|of|the|and[ \t]+the))*"
)
_LIST = re.compile(rf"(?<![\p{{L}}'’-]){_ITEM}(?:,[ \t]*{_ITEM})*,?[ \t]+(?:and|&)[ \t]+{_ITEM}")
# what the list is: "are on the bundle", "are in the 4K box set", "are all 50% off"
_SOLD = re.compile(
    r"(?i)[ \t]+(?:are|were|is)[ \t]+[^.\n!?]{0,30}?(?<![\p{L}])"
    r"(?:bundles?|box[ \t]?sets?|%[ \t]?off|on[ \t]+sale|half[ \t]+price|"
    r"discs?|dvds?|blu-?rays?|editions?|dlcs?)(?![\p{L}])"
)


# or what holds it, before it: "the bundle includes X, Y and Z", "box set: X, Y and Z"
_HOLDS = alternatives("titles_holding_words")
_SOLD_BEFORE = re.compile(
    r"(?i)(?<![\p{L}])(?:bundles?|box[ \t]?sets?|pack|collection)[ \t]*"
    rf"(?:(?:{_HOLDS})[ \t]*|:[ \t]*)$"
)


def in_title_list(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is one item of a list of titles sold together (see the
    module)."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end < 0 else line_end
    for m in _LIST.finditer(text, line_start, line_end):
        sold = _SOLD.match(text, m.end()) or _SOLD_BEFORE.search(text, line_start, m.start())
        if m.start() <= start and end <= m.end() and sold:
            return True
    return False
