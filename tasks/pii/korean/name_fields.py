"""Korean names where the text's form says "a name goes here": form labels (``성명: 김민수``),
JSON fields of tool results (``"customer": "김도윤"``, nested ``"ship_to": {"name": ...}``),
``key=value`` CRM lines, CSV/TSV/Markdown tables under a header with a name column, names
spelled with spaces (``김 민 수``) and names in brackets after a relative (``할아버지(최불암)``).

The field is the evidence: a value under ``customer`` or ``이름`` is replaced whatever it
looks like, but a bare ``name`` may name a product (``"name": "무선 이어폰"``), so its Hangul
value must also be shaped like a person's name.
"""

from __future__ import annotations

from collections.abc import Callable

import regex as re

from tasks.pii.korean.name_lists import KIN, SURNAMES, TITLES, surname_split
from tasks.pii.korean.romanised import romanised_spans
from tasks.pii.lexicon import alternatives

_H = r"\p{Hangul}"
# form labels before a name: 성명, 이름, 예금주, 수령인
_LABELS = alternatives("korean_name_fields_labels")
_LABELLED = re.compile(
    rf"(?:{_LABELS})(?:\s?명)?(?:\([^)]{{0,10}}\))?[\"']?\s*[:：]\s*[\"']?"
    rf"([{_H}](?: ?[{_H}]){{1,3}})(?![{_H}])"
)
_BRACKETED = re.compile(rf"(?:{KIN}|{TITLES}|본인|고객)\s?[(（]([{_H}]{{2,4}})[)）]")
_SPACED = re.compile(rf"(?<![{_H}])(?:{SURNAMES})\s[{_H}](?:\s?[{_H}])(?![{_H}])")
# "장 혁이에요": a one-syllable given name, only with the copula or a title glued to it
_SPACED_ONE = re.compile(
    rf"(?<![{_H}])(?:{SURNAMES})\s[{_H}]"
    rf"(?={alternatives('korean_name_fields_after_one_syllable')})"
)
# keys whose value is a person whatever it looks like: a name's parts (full_name), any key
# ending in a person's role and an optional _name (billing_customer, recipient_name), 이름
_PERSON_KEY = (
    "(?i:"
    + alternatives("korean_name_fields_name_keys")
    + "|[a-z_]*(?:"
    + alternatives("korean_name_fields_person_roles")
    + ")(?:_?name)?|"
    + alternatives("korean_name_fields_person_keys")
    + ")"
)
_USER_KEY = re.compile(r"(?i)(?:user|member|account|kor?|display)_?name|name_?ko")
_NAME_KEY = r"(?i:[a-z_]*name[a-z_]*)"  # a product has a name too: the value must look like one
_VALUE = r"(?P<v>[\p{L}][\p{L} .'/-]{0,40}?)"
_JSON_NAME = re.compile(rf"[\"'](?P<k>{_PERSON_KEY}|{_NAME_KEY})[\"']\s*:\s*[\"']{_VALUE}[\"']")
_KEY_VALUE = re.compile(
    rf"(?<![\w])(?P<k>{_PERSON_KEY}|{_NAME_KEY})\s*=\s*[\"']?(?P<v>[\p{{L}}][\p{{L}}/-]{{0,30}})"
)
# a thing's name (product_name, app_name), never a person's
_NOT_PERSON_KEY = re.compile("(?i)(?:" + alternatives("korean_name_fields_not_person_keys") + ")")
# the columns and JSON keys of e-mails, phones, ids, birth dates and addresses
_PERSONAL_COLUMN = re.compile("(?i)" + alternatives("korean_name_fields_personal_columns"))
_PERSONAL_JSON_KEY = re.compile(
    r"[\"'](?i:" + alternatives("korean_name_fields_personal_json_keys") + r")[\"']\s*:"
)
_HEADER_NAME = re.compile(
    rf"^(?:{_PERSON_KEY}|{alternatives('korean_name_fields_header_names')})$", re.IGNORECASE
)


def field_spans(text: str, common_word: Callable[[str], bool]) -> list[tuple[int, int]]:
    """Names in labels, JSON/``key=value`` fields and tables of ``text``; ``common_word``
    says whether kiwi reads a Hangul value as an ordinary word (a bare ``name`` field's value
    must not be one)."""
    spans = []
    for m in _LABELLED.finditer(text):
        value = m.group(1)
        cut = len(value)
        if len(value.replace(" ", "")) == 4 and value[-1] in "님씨은는이가을를도":
            cut = len(value) - 1  # "김민수님": the title is not part of the name
        spans.append((m.start(1), m.start(1) + cut))
    # a record that carries e-mails, phones or ids: its bare "name" is a person's
    record = _PERSONAL_JSON_KEY.search(text) is not None
    for pattern in (_JSON_NAME, _KEY_VALUE):
        for m in pattern.finditer(text):
            key = m.group("k")
            if record and pattern is _JSON_NAME and key.lower() == "name":
                key = "full_name"
            if _person_value(key, m.group("v").strip(), common_word):
                spans.append((m.start("v"), m.start("v") + len(m.group("v").rstrip())))
    spans += _table_spans(text, common_word)
    spans += [m.span() for m in _SPACED_ONE.finditer(text)]
    spans += [
        m.span(1)
        for m in _BRACKETED.finditer(text)
        if m.group(1)[0] in SURNAMES or surname_split(m.group(1))
    ]
    return spans


def spaced_spans(text: str, cued: Callable[[int, int], bool]) -> list[tuple[int, int]]:
    """``김 민 수``, ``정 우성``: a surname, a space and a given name, where ``cued`` says
    something around it (a title after, a label before) makes it a person."""
    return [m.span() for m in _SPACED.finditer(text) if cued(m.start(), m.end())]


def _person_value(key: str, value: str, common_word: Callable[[str], bool]) -> bool:
    if not value or _NOT_PERSON_KEY.search(key) or any(c.isdigit() for c in value):
        return False
    if re.fullmatch(_PERSON_KEY, key):
        return True
    if _USER_KEY.fullmatch(key) and re.fullmatch(rf"[{_H} ]+", value):
        return True  # a user's or member's name in Hangul ("admin" under user_name is not)
    return _name_shaped(value, common_word)


def _name_shaped(value: str, common_word: Callable[[str], bool]) -> bool:
    """A bare ``name`` field's value that reads as a person: a Hangul full name kiwi does not
    know as a word, or a romanised Korean name (``Park Seoyeon``, ``KIM/MINSEO``), not
    ``"name": "Premium"``."""
    compact = value.replace(" ", "")
    if re.fullmatch(rf"[{_H}]+", compact):
        return 2 <= len(compact) <= 5 and compact[0] in SURNAMES and not common_word(compact)
    return any(e - s == len(value) for s, e in romanised_spans(value))


def _table_spans(text: str, common_word: Callable[[str], bool]) -> list[tuple[int, int]]:
    """Cells under a name column of a CSV, TSV or Markdown table (the header row names it;
    a row is a line split into as many cells as the header)."""
    spans: list[tuple[int, int]] = []
    offset = 0
    sep, width = "", 0
    columns: list[tuple[int, str]] = []
    for line in text.split("\n"):
        cells = _cells(line, sep) if sep else []
        if sep and re.fullmatch(r"[\s|:-]+", line):
            pass  # a Markdown table's rule under its header
        elif sep and len(cells) == width:
            for col, key in columns:
                start, value = cells[col]
                if _person_value(key, value, common_word):
                    spans.append((offset + start, offset + start + len(value)))
        else:
            sep, width, columns = _header(line)
        offset += len(line) + 1
    return spans


def _header(line: str) -> tuple[str, int, list[tuple[int, str]]]:
    """The separator, the number of cells and the ``(index, key)`` name columns of a header
    row (empty when ``line`` is none)."""
    for sep in ("\t", "|", ","):
        cells = _cells(line, sep)
        if len(cells) >= 2:
            # "CSV: 이름,연락처": a label before the first column's name
            names = [
                (i, _last(v)) for i, (_s, v) in enumerate(cells) if _HEADER_NAME.match(_last(v))
            ]
            if names and any(_PERSONAL_COLUMN.search(_last(v)) for _s, v in cells):
                # a customer table (its rows carry e-mails, phones, ids): a bare "name" column
                # is a person's, whatever kiwi reads it as ("황미정": 미정 is also a word)
                names = [(i, "full_name" if k.lower() == "name" else k) for i, k in names]
            if names:
                return sep, len(cells), names
    return "", 0, []


def _last(cell: str) -> str:
    return cell.rsplit(":", 1)[-1].strip()


def _cells(line: str, sep: str) -> list[tuple[int, str]]:
    """``(offset, stripped value)`` of each cell of ``line`` split on ``sep`` (a Markdown
    row's outer bars dropped)."""
    out, pos = [], 0
    parts = line.split(sep)
    for part in parts:
        lead = len(part) - len(part.lstrip())
        out.append((pos + lead, part.strip()))
        pos += len(part) + len(sep)
    if sep == "|" and out and not out[0][1]:
        out = out[1:]
    if sep == "|" and out and not out[-1][1]:
        out = out[:-1]
    return out
