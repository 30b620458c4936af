"""Tool results written as SQL, read as records: an agent's database tool echoes the statement
it ran or a migration log the rows it wrote.

- ``INSERT INTO travellers (full_name, passport_no, dob) VALUES ('...', '...', '...'), (...)``:
  each value is a :class:`~tasks.pii.generic.fields.Field` named by its column;
- ``COPY travellers (name, passport_no) FROM stdin;`` and the tab-separated rows after it;
- a row printed as a tuple (``('...', '...')``) beside the ``SELECT`` whose column list has as
  many columns.

The fields' keys are judged as a JSON record's are, a ``doc_type`` column's value is their kind.
Each statement is one :class:`~tasks.pii.generic.tables.Region` whose cells are its values, so a
replacement never eats a quote. The reader is one pass over the text: a quote that never closes
ends the statement at the end of the text.
"""

from __future__ import annotations

import regex as re

from tasks.pii.generic.fields import Field
from tasks.pii.generic.json_scan import KIND_KEY
from tasks.pii.generic.tables import Region

_IDENT = r"(?:`[^`\n]{1,64}`|\"[^\"\n]{1,64}\"|\[[^\]\n]{1,64}\]|[A-Za-z_][\w$]{0,63})"
_TABLE = rf"{_IDENT}(?:\.{_IDENT})?"
_COLUMNS = rf"\(\s*+(?P<cols>{_IDENT}(?:\s*+,\s*+{_IDENT}){{0,199}})\s*+\)"
_INSERT = re.compile(
    rf"(?i)\b(?:insert|replace)\s++(?:ignore\s++)?into\s++(?P<table>{_TABLE})\s*+{_COLUMNS}"
    r"\s*+values\s*+"
)
_COPY = re.compile(rf"(?i)\bcopy\s++(?P<table>{_TABLE})\s*+{_COLUMNS}\s*+from\s++stdin[^\n]*\n")
_SELECT = re.compile(
    rf"(?i)\bselect\s++(?:distinct\s++)?(?P<cols>{_TABLE}(?:\s*+,\s*+{_TABLE}){{1,199}})"
    r"\s++from\b"
)
_TUPLE = re.compile(r"\(\s*'")  # a printed row starts with a quoted value
_NULLS = frozenset(["null", "\\n", "default", "true", "false"])


def sql(text: str) -> tuple[list[Region], list[Field]]:
    """The SQL statements' regions of ``text`` and their fields (none where it holds none)."""
    lower = text.lower()
    if "insert" not in lower and "copy" not in lower and "select" not in lower:
        return [], []
    regions: list[Region] = []
    fields: list[Field] = []
    for m in _INSERT.finditer(text):
        table, cols = _name(m.group("table")), _names(m.group("cols"))
        rows, end = _tuples(text, m.end(), many=True)
        _add(regions, fields, m.start(), end, table, cols, rows)
    for m in _COPY.finditer(text):
        table, cols = _name(m.group("table")), _names(m.group("cols"))
        rows, end = _copy_rows(text, m.end(), len(cols))
        _add(regions, fields, m.start(), end, table, cols, rows)
    selects = [_names(m.group("cols")) for m in _SELECT.finditer(text)]
    taken = [(r.start, r.end) for r in regions]
    for m in _TUPLE.finditer(text) if selects else ():
        if any(s <= m.start() < e for s, e in taken):
            continue
        rows, end = _tuples(text, m.start(), many=False)
        width = len(rows[0]) if rows else 0
        named = [cols for cols in selects if len(cols) == width]
        if width > 1 and len(named) == 1:
            _add(regions, fields, m.start(), end, "", named[0], rows)
            taken.append((m.start(), end))
    return regions, fields


_Row = list[tuple[int, int, str]]  # a row's values: (start, end, value)


def _add(
    regions: list[Region],
    fields: list[Field],
    start: int,
    end: int,
    table: str,
    cols: list[str],
    rows: list[_Row],
) -> None:
    """One statement: its region (its values are its cells) and a field per named value (none
    for a row whose width is not its columns')."""
    siblings = frozenset(cols)
    cells = []
    for row in rows:
        cells += [(s, e) for s, e, v in row if v]
        if len(row) != len(cols):
            continue  # a row that does not fit its columns names none of its values
        kind = next(
            (v for c, (_s, _e, v) in zip(cols, row, strict=True) if KIND_KEY.fullmatch(c)), ""
        )
        path = (table,) if table else ()
        fields += [
            Field((*path, c), siblings, s, e, v, kind=kind)
            for c, (s, e, v) in zip(cols, row, strict=True)
            if v and v.lower() not in _NULLS
        ]
    regions.append(Region(start, end, tuple(cells)))


def _tuples(text: str, at: int, *, many: bool) -> tuple[list[_Row], int]:
    """The parenthesised rows from ``at`` (one, or a comma-separated list) and where they end."""
    rows: list[_Row] = []
    n = len(text)
    while True:
        while at < n and text[at] in " \t\r\n":
            at += 1
        if at >= n or text[at] != "(":
            return rows, at
        row, at = _row(text, at + 1)
        rows.append(row)
        while at < n and text[at] in " \t\r\n":
            at += 1
        if not many or at >= n or text[at] != ",":
            return rows, at
        at += 1


def _row(text: str, at: int) -> tuple[_Row, int]:
    """The values of one row whose ``(`` is before ``at``, and where its ``)`` ends."""
    row: _Row = []
    n, depth, start = len(text), 0, at
    while at < n:
        c = text[at]
        if c == "'":  # a string literal: its content is the value ('' is a quote)
            end = at + 1
            while end < n and (text[end] != "'" or text.startswith("''", end)):
                end += 2 if text[end] == "'" else 1
            row.append((at + 1, end, text[at + 1 : end].replace("''", "'")))
            at, start = end + 1, -1
            continue
        if c == "(":
            depth += 1
        elif c == ")" and depth:
            depth -= 1
        elif c in ",)" and not depth:
            if start >= 0:
                raw = text[start:at]
                s = start + len(raw) - len(raw.lstrip())
                e = at - (len(raw) - len(raw.rstrip()))
                row.append((s, e, text[s:e]))
            if c == ")":
                return row, at + 1
            start = at + 1
        at += 1
    return row, n


def _copy_rows(text: str, at: int, width: int) -> tuple[list[_Row], int]:
    """``COPY ... FROM stdin``'s tab-separated rows from ``at`` up to ``\\.`` or a row of
    another width."""
    rows: list[_Row] = []
    while width > 1 and at < len(text):
        end = text.find("\n", at)
        end = len(text) if end < 0 else end
        values = text[at:end].split("\t")
        if text[at:end] == "\\." or len(values) != width:
            return rows, at
        row, s = [], at
        for v in values:
            row.append((s, s + len(v), v))
            s += len(v) + 1
        rows.append(row)
        at = end + 1
    return rows, len(text)


def _name(ident: str) -> str:
    """An identifier without its quotes and its schema (``public."Travellers"`` -> ``Travellers``)."""
    last = re.findall(_IDENT, ident)[-1]
    return last[1:-1] if last[0] in '`"[' else last


def _names(cols: str) -> list[str]:
    return [_name(c) for c in re.findall(_TABLE, cols)]
