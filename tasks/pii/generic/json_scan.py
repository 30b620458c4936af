"""JSON (and Python-literal) objects anywhere in a text, parsed with every position kept.

Tool results reach the anonymiser as text: a bare JSON object, JSON after a prompt
(``get_customer(5521) -> {...}``), a Python ``repr`` (``{'first_name': 'Chiara'}``), or
JSON encoded again inside a JSON string (``"record": "{\\"mrn\\": ...}"``). :func:`json_spans`
finds each object or array that parses, and reports where its keys and values are, so a value
under a personal key can be replaced and every replacement stays inside one string value:
the result is still JSON, with the same keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import regex as re

# the key that says what a record is ("type": "passport", "doc_type": "P", "docType", "kind")
KIND_KEY = re.compile(r"(?i)(?:doc(?:ument)?[_ -]?)?type|kind")

_WS = " \t\r\n"
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n"}
_ESCAPES.update(r="\r", t="\t")
_LITERALS = ("true", "false", "null", "True", "False", "None")
_NUMBER_CHARS = frozenset("0123456789+-.eE")
MAX_DEPTH = 32


@dataclass(frozen=True)
class JsonString:
    """A string token: raw content span (inside the quotes), decoded value and, per decoded
    character, the raw span it came from (an escape maps to its whole sequence)."""

    start: int
    end: int
    value: str
    raw_starts: tuple[int, ...]
    raw_ends: tuple[int, ...]

    def raw_span(self, start: int, end: int) -> tuple[int, int]:
        """The raw span that decoded ``value[start:end]`` was written as."""
        return self.raw_starts[start], self.raw_ends[end - 1]


@dataclass(frozen=True)
class JsonValue:
    """A scalar value under a key path: a string, or a bare token (number or literal)."""

    path: tuple[str, ...]
    siblings: frozenset[str]
    start: int
    end: int
    text: str
    string: JsonString | None
    kind: str = ""  # what the object says it is: its "type" (or "doc_type", "kind") value


@dataclass
class JsonDoc:
    """One parsed object or array: its span, every string (keys too), the scalar values under
    their key paths, the bare tokens (numbers and literals) and the spans of its keys."""

    start: int
    end: int
    strings: list[JsonString] = field(default_factory=list)
    values: list[JsonValue] = field(default_factory=list)
    bare: list[tuple[int, int]] = field(default_factory=list)
    keys: list[tuple[int, int]] = field(default_factory=list)


class _Fail(Exception):
    """Not JSON here."""


class _Parser:
    def __init__(self, text: str, start: int) -> None:
        self.text = text
        self.doc = JsonDoc(start, start)
        self.objects = 0
        self.steps = 0

    def ws(self, i: int) -> int:
        while i < len(self.text) and self.text[i] in _WS:
            i += 1
        return i

    def parse(self, i: int, path: tuple[str, ...], depth: int) -> int:
        if depth > MAX_DEPTH or i >= len(self.text):
            raise _Fail
        char = self.text[i]
        if char == "{":
            return self.obj(i + 1, path, depth)
        if char == "[":
            return self.array(i + 1, path, depth)
        raise _Fail

    def obj(self, i: int, path: tuple[str, ...], depth: int) -> int:
        i = self.ws(i)
        self.objects += 1
        pending: list[JsonValue] = []
        keys: list[str] = []
        while i < len(self.text) and self.text[i] != "}":
            key = self.string(i)
            keys.append(key.value)
            self.doc.keys.append((key.start, key.end))
            i = self.ws(key.end + 1)
            if i >= len(self.text) or self.text[i] != ":":
                raise _Fail
            i = self.ws(i + 1)
            end, scalar = self.value(i, (*path, key.value), depth)
            if scalar is not None:
                pending.append(scalar)
            i = self.ws(end)
            if i < len(self.text) and self.text[i] == ",":
                i = self.ws(i + 1)
            elif i < len(self.text) and self.text[i] != "}":
                raise _Fail
        if i >= len(self.text):
            raise _Fail
        siblings = frozenset(keys)
        kind = next((v.text for v in pending if KIND_KEY.fullmatch(v.path[-1])), "")
        self.doc.values += [
            JsonValue(v.path, siblings, v.start, v.end, v.text, v.string, kind) for v in pending
        ]
        return i + 1

    def array(self, i: int, path: tuple[str, ...], depth: int) -> int:
        i = self.ws(i)
        while i < len(self.text) and self.text[i] != "]":
            end, scalar = self.value(i, path, depth)
            if scalar is not None:
                self.doc.values.append(scalar)
            i = self.ws(end)
            if i < len(self.text) and self.text[i] == ",":
                i = self.ws(i + 1)
            elif i < len(self.text) and self.text[i] != "]":
                raise _Fail
        if i >= len(self.text):
            raise _Fail
        return i + 1

    def value(self, i: int, path: tuple[str, ...], depth: int) -> tuple[int, JsonValue | None]:
        """The end of the value at ``i`` and, for a scalar, the value itself."""
        self.steps += 1
        if i >= len(self.text):
            raise _Fail
        char = self.text[i]
        if char in "{[":
            return self.parse(i, path, depth + 1), None
        if char in "\"'":
            s = self.string(i)
            return s.end + 1, JsonValue(path, frozenset(), s.start, s.end, s.value, s)
        for literal in _LITERALS:
            if self.text.startswith(literal, i):
                end = i + len(literal)
                self.doc.bare.append((i, end))
                return end, JsonValue(path, frozenset(), i, end, literal, None)
        end = i
        while end < len(self.text) and self.text[end] in _NUMBER_CHARS:
            end += 1
        if end == i or not any(c.isdigit() for c in self.text[i:end]):
            raise _Fail
        self.doc.bare.append((i, end))
        return end, JsonValue(path, frozenset(), i, end, self.text[i:end], None)

    def string(self, i: int) -> JsonString:
        """The string token whose opening quote is at ``i``."""
        quote = self.text[i] if i < len(self.text) else ""
        if quote not in ("'", '"'):
            raise _Fail
        out: list[str] = []
        starts: list[int] = []
        ends: list[int] = []
        j = i + 1
        while j < len(self.text):
            char = self.text[j]
            if char == quote:
                s = JsonString(i + 1, j, "".join(out), tuple(starts), tuple(ends))
                self.doc.strings.append(s)
                return s
            if char == "\n":
                raise _Fail
            if char != "\\":
                out.append(char)
                starts.append(j)
                ends.append(j + 1)
                j += 1
                continue
            nxt = self.text[j + 1 : j + 2]
            if nxt == "u" and _is_hex(self.text[j + 2 : j + 6]):
                decoded, width = chr(int(self.text[j + 2 : j + 6], 16)), 6
            elif nxt in _ESCAPES:
                decoded, width = _ESCAPES[nxt], 2
            else:
                raise _Fail
            out.append(decoded)
            starts.append(j)
            ends.append(j + width)
            j += width
        raise _Fail


def _is_hex(chars: str) -> bool:
    return len(chars) == 4 and all(c in "0123456789abcdefABCDEF" for c in chars)


def json_docs(text: str) -> Iterator[JsonDoc]:
    """Every outermost object, or array holding an object, that parses, left to right.

    Failed attempts are bounded (a truncated tool result re-parses from each brace): past a
    budget proportional to the text, the rest is left as free text."""
    i = 0
    budget = 4 * len(text) + 1000
    while budget > 0:
        starts = [p for p in (text.find("{", i), text.find("[", i)) if p >= 0]
        if not starts:
            return
        start = min(starts)
        parser = _Parser(text, start)
        try:
            end = parser.parse(start, (), 0)
        except (_Fail, RecursionError):
            budget -= parser.steps
            i = start + 1
            continue
        if parser.objects:
            parser.doc.end = end
            yield parser.doc
        i = end


def encoded_docs(text: str) -> Iterator[JsonString]:
    """String tokens outside any object that hold JSON again (``output: "{\\"a\\": 1}"``)."""
    for m in re.finditer(r"[\"'](?=\s*[{\[])", text):
        try:
            token = _Parser(text, m.start()).string(m.start())
        except _Fail:
            continue
        if token.value.lstrip()[:1] in "{[":
            yield token
