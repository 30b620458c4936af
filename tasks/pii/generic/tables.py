"""Tables and key/value records in text, with positions: CSV (``,``, ``;`` or tab) under a
header, markdown and database pipe tables (``| a | b |``, ``+---+`` borders), ``key=value``
pairs (CRM calls, logs, query strings) and ``Key: value`` form lines.

Each table becomes a :class:`Region` whose cells are where a replacement may go (never over a
delimiter, so a row keeps its columns) and a :class:`~tasks.pii.generic.fields.Field` per data cell,
keyed by its column's header. Key/value pairs only give fields: their line stays free text.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import regex as re

from tasks.pii.generic.fields import Field
from tasks.pii.generic.json_scan import KIND_KEY

_HEADER_CELL = re.compile(r"^[A-Za-z_][\w .#/()'-]{0,39}$")
_BORDER = re.compile(r"^\s*[+|]?[\s:=+|-]*-[\s:=+|-]*[+|]?\s*$")
_KEY = r"[A-Za-z_][\w.-]{0,40}"
_PAIR = re.compile(
    rf"(?<![\w.-])(?P<key>{_KEY})=(?:\"(?P<q>[^\"\n]*)\"|'(?P<s>[^'\n]*)'"
    rf"|(?P<v>[^\s;&|\"'=][^;&|\n=]*?))(?=\s*[;&|]|,?\s*{_KEY}=|[ \t]*(?:\n|$))"
)
_FORM = re.compile(
    r"(?m)^[ \t>]*(?:[-*•][ \t]+)?(?P<key>[A-Za-z][\w .'/()-]{0,40}?)[ \t]*:[ \t]+"
    r"(?P<v>[^\n]*?)[ \t]*$"
)
DELIMITERS = ("|", "\t", ",", ";")


@dataclass(frozen=True)
class Region:
    """A span of structured text: the cells inside it where a replacement may go, its bare
    JSON tokens (replaced whole, quoted), the escape sequences no replacement may split, and
    its keys (header cells, JSON keys: structure, never replaced by name propagation)."""

    start: int
    end: int
    cells: tuple[tuple[int, int], ...]
    bare: tuple[tuple[int, int], ...] = ()
    escapes: tuple[tuple[int, int], ...] = ()
    keys: tuple[tuple[int, int], ...] = ()


def _lines(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for line in text.split("\n"):
        spans.append((start, start + len(line)))
        start += len(line) + 1
    return spans


def split_cells(text: str, start: int, end: int, delim: str) -> list[tuple[int, int]]:
    """The content span of each cell of the row ``text[start:end]`` (spaces and the quotes
    of a quoted CSV cell left out; a pipe row's outer pipes are not cells)."""
    line = text[start:end]
    if delim == "|":
        inner = line.strip()
        offset = start + line.index(inner) if inner else start
        if inner.startswith("|"):
            inner, offset = inner[1:], offset + 1
        inner = inner.removesuffix("|")
        raw, pos = [], offset
        for part in inner.split("|"):
            raw.append((pos, pos + len(part)))
            pos += len(part) + 1
    else:
        raw = _quoted_split(line, start, delim)
    return [_trim(text, s, e) for s, e in raw]


def _quoted_split(line: str, offset: int, delim: str) -> list[tuple[int, int]]:
    cells, i, start, quoted = [], 0, 0, False
    while i < len(line):
        char = line[i]
        if char == '"' and (quoted or line[start:i].strip() == ""):
            if quoted and line[i + 1 : i + 2] == '"':
                i += 2
                continue
            quoted = not quoted
        elif char == delim and not quoted:
            cells.append((offset + start, offset + i))
            start = i + 1
        i += 1
    cells.append((offset + start, offset + len(line)))
    return cells


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start] in " \t\r":
        start += 1
    while end > start and text[end - 1] in " \t\r":
        end -= 1
    if end - start >= 2 and text[start] == text[end - 1] == '"':
        start, end = start + 1, end - 1
    return start, end


def tables(text: str) -> Iterator[tuple[Region, list[Field]]]:
    """Every table with a header and at least one row, as a region and its data fields."""
    lines = _lines(text)
    i = 0
    while i < len(lines):
        found = None
        for delim in DELIMITERS:
            found = _table_at(text, lines, i, delim)
            if found:
                break
        if found is None:
            i += 1
            continue
        next_line, region, fields = found
        yield region, fields
        i = next_line


def _table_at(
    text: str, lines: list[tuple[int, int]], i: int, delim: str
) -> tuple[int, Region, list[Field]] | None:
    first = i
    start, end = lines[i]
    if delim not in text[start:end] or _BORDER.match(text[start:end]):
        if not (delim == "|" and _BORDER.match(text[start:end]) and i + 1 < len(lines)):
            return None
        i += 1  # a database table opens with a border line
        start, end = lines[i]
    header = split_cells(text, start, end, delim)
    keys = [text[s:e] for s, e in header]
    if len(header) < 2 or not all(_HEADER_CELL.match(k) for k in keys):
        return None
    rows, j = [], i + 1
    while j < len(lines):
        s, e = lines[j]
        if delim == "|" and _BORDER.match(text[s:e]) and "-" in text[s:e]:
            j += 1
            continue
        cells = split_cells(text, s, e, delim) if delim in text[s:e] else []
        if len(cells) != len(header):
            break
        rows.append(cells)
        j += 1
    if not rows:
        return None
    siblings = frozenset(keys)
    kinds = [i for i, k in enumerate(keys) if KIND_KEY.fullmatch(k.strip())]
    fields = [
        Field(
            (key,),
            siblings,
            s,
            e,
            text[s:e].replace('""', '"'),
            kind=text[slice(*row[kinds[0]])] if kinds else "",
        )
        for row in rows
        for key, (s, e) in zip(keys, row, strict=True)
    ]
    all_cells = tuple(header + [c for row in rows for c in row])
    region = Region(lines[first][0], lines[j - 1][1], all_cells, keys=tuple(header))
    return j, region, fields


def pairs(text: str) -> Iterator[Field]:
    """``key=value`` pairs (a dotted key is a path: ``ship_to.name=``) and ``Key: value``
    form lines, as fields (their keys are classified by the caller)."""
    found = list(_PAIR.finditer(text))
    siblings = frozenset(m.group("key").split(".")[-1] for m in found)
    for m in found:
        group = next(g for g in ("q", "s", "v") if m.group(g) is not None)
        s, e = m.span(group)
        path = tuple(m.group("key").split("."))
        yield Field(path, siblings, s, e, m.group(group))
    forms = list(_FORM.finditer(text))
    form_keys = frozenset(m.group("key") for m in forms)
    for m in forms:
        if m.group("v") and "=" not in m.group("v"):
            start, end = m.span("v")
            yield Field((m.group("key"),), form_keys, start, end, m.group("v"))
