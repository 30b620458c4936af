"""Tool results written as XML or HTML, read as records: a SOAP or a GDS reply
(``<PassportNumber>``, ``<Document DocID="..." DocType="2"/>``), a FHIR resource
(``<name family="..." given="..."/>``), a table, a definition list or a form a scraper
returned (``<th>Passport</th>`` over ``<td>``, ``<dt>`` before ``<dd>``, ``<input
name="dob" value="...">``, ``<col name="full_name">``).

Each element holding text alone, and each attribute, is a :class:`~tasks.pii.generic.fields.Field`
whose key is its tag or attribute name (or the ``name`` / ``key`` attribute that names it, its
table column's header, its definition's term), whose siblings are the keys beside it and whose
kind is a ``type`` beside it; the fields' keys are judged as a JSON record's are. The markup is
one :class:`~tasks.pii.generic.tables.Region` whose cells are its text and attribute values, so
a replacement never lands in a tag.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import regex as re

from tasks.pii.generic.fields import Field
from tasks.pii.generic.json_scan import KIND_KEY
from tasks.pii.generic.tables import Region

# possessive: a tag that never ends ("<a b=c b=c ..." with no ">") is given up in one pass
_TAG = re.compile(
    r"<(?P<close>/)?(?P<name>[A-Za-z_][\w.:-]{0,63})"
    r"(?P<attrs>(?:\s++[A-Za-z_:][\w.:-]*+"
    r"(?:\s*+=\s*+(?:\"[^\"<>]*+\"|'[^'<>]*+'|[^\s\"'=<>`]++))?+)*+)"
    r"\s*+(?P<empty>/)?>"
)
_ATTR = re.compile(
    r"(?P<key>[A-Za-z_:][\w.:-]*)\s*=\s*(?:\"(?P<v>[^\"<>]*)\"|'(?P<v>[^'<>]*)'|(?P<v>[^\s\"'=<>`]+))"
)
# an element that a name attribute names ("<col name='full_name'>", "<input name='dob'>")
_NAMING = ("name", "key", "field", "property")
# HTML's elements that never hold a close tag
_MAX_DEPTH = 64  # deeper elements are read as empty ones (no record nests deeper)
_VOID = frozenset(["br", "hr", "img", "input", "link", "meta"])


@dataclass
class _Element:
    name: str
    attrs: dict[str, tuple[int, int, str]]  # attribute -> (start, end, value)
    open_end: int  # where its content starts
    key: str = ""  # what names its value (:func:`_key`)
    children: list[str] = field(default_factory=list)
    pending: list[tuple[str, int, int, str]] = field(default_factory=list)  # child fields
    header: list[str] = field(default_factory=list)  # a table's column names
    cells: int = 0  # the row's cells so far
    term: str = ""  # a definition list's last term


def markup(text: str) -> tuple[list[Region], list[Field]]:
    """The markup regions of ``text`` and their fields (none where it holds no element)."""
    tags = list(_TAG.finditer(text)) if "<" in text else []
    if not any(t.group("close") or t.group("empty") or t.group("name") in _VOID for t in tags):
        return [], []
    fields: list[Field] = []
    cells: list[tuple[int, int]] = []
    stack: list[_Element] = [_Element("", {}, 0)]
    at = tags[0].start()
    for tag in tags:
        if tag.start() > at and text[at : tag.start()].strip():
            cells.append((at, tag.start()))
        at = tag.end()
        name = _local(tag.group("name"))
        if tag.group("close"):
            _close(text, stack, name, tag.start(), fields)
            continue
        attrs = {
            a.group("key"): (*a.span("v"), a.group("v")) for a in _ATTR.finditer(tag.group("attrs"))
        }
        offset = tag.start("attrs")
        attrs = {k: (s + offset, e + offset, v) for k, (s, e, v) in attrs.items()}
        cells += [(s, e) for s, e, v in attrs.values() if v.strip()]
        element = _Element(name, attrs, tag.end())
        if name.lower() == "tr":  # a row's cells are named by the table's header row
            element.header = next((list(e.header) for e in reversed(stack) if e.header), [])
        fields += _attribute_fields(element)
        element.key = _key(element, stack[-1])
        stack[-1].children.append(element.key)
        if not (tag.group("empty") or name.lower() in _VOID or len(stack) > _MAX_DEPTH):
            stack.append(element)
    region = Region(tags[0].start(), tags[-1].end(), tuple(cells))
    return [region], fields


def _close(text: str, stack: list[_Element], name: str, at: int, out: list[Field]) -> None:
    """Close the open element ``name`` (and any left open inside it) at ``at``."""
    if not any(e.name == name for e in stack[1:]):  # at most _MAX_DEPTH deep
        return  # a stray close tag
    while stack[-1].name != name:
        _finish(stack.pop(), out)
    element = stack.pop()
    parent = stack[-1]
    if not element.children:  # text alone: a field
        raw = text[element.open_end : at]
        start = element.open_end + len(raw) - len(raw.lstrip())
        end = at - (len(raw) - len(raw.rstrip()))
        if end > start:
            value = html.unescape(text[start:end])
            parent.pending.append((element.key, start, end, value))
    _finish(element, out)
    lower = element.name.lower()
    if lower == "tr" and element.header:  # a header row: its table's rows take its names
        for above in reversed(stack):
            above.header = element.header
            if above.name.lower() == "table":
                break
    elif lower == "th":
        parent.header.append(html.unescape(text[element.open_end : at].strip()))
    elif lower == "dt":
        parent.term = html.unescape(text[element.open_end : at].strip())


def _finish(element: _Element, out: list[Field]) -> None:
    """Turn ``element``'s children's text into fields, siblings and kind from them all."""
    siblings = frozenset(k for k, *_ in element.pending) | frozenset(element.children)
    kind = next((v for k, _s, _e, v in element.pending if KIND_KEY.fullmatch(k)), "")
    path = (element.name,) if element.name else ()
    out += [Field((*path, k), siblings, s, e, v, kind=kind) for k, s, e, v in element.pending]


def _key(element: _Element, parent: _Element) -> str:
    """What names ``element``'s value: a naming attribute, its column's header, its term, its
    tag."""
    lower = element.name.lower()
    for attr in _NAMING:
        if attr in element.attrs and lower not in ("input", "meta"):
            return element.attrs[attr][2]
    if lower in ("td", "th"):
        parent.cells += 1
        header = parent.header
        return header[parent.cells - 1] if lower == "td" and parent.cells <= len(header) else lower
    if lower == "dd" and parent.term:
        return parent.term
    return element.name


def _attribute_fields(element: _Element) -> list[Field]:
    """An element's attributes as fields; a form's ``<input name="dob" value="...">`` as one."""
    attrs = element.attrs
    if element.name.lower() in ("input", "meta", "param") and "value" in attrs:
        named = next((attrs[a][2] for a in ("name", "id", "property") if a in attrs), "")
        if named:
            start, end, value = attrs["value"]
            return [Field((element.name, named), frozenset(), start, end, html.unescape(value))]
        return []
    siblings = frozenset(attrs)
    kind = next((v for k, (_s, _e, v) in attrs.items() if KIND_KEY.fullmatch(k)), "")
    return [
        Field((element.name, key), siblings, start, end, html.unescape(value), kind=kind)
        for key, (start, end, value) in attrs.items()
        if value.strip() and key not in _NAMING
    ]


def _local(name: str) -> str:
    """A tag's name without its namespace prefix (``soap:Body`` -> ``Body``)."""
    return name.rsplit(":", 1)[-1]
