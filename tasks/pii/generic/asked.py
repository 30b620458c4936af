"""Answers to what was asked. In a conversation (lines opening with a speaker's label, two
speakers at least, one of them a role: ``Agent:``, ``Customer:``, ``[agent]``, ``assistant:``), a
turn that asks for fields by name ("full name, passport number, and date of birth", "the name
of the hotel and the booking number", "What's your order number?") is answered by the other
speaker's next turn that holds a value, a filler turn or two between ("one sec", "hang on"),
and by the same speaker's turns right after it that answer alike (one row per traveller):

- the answer's parts (split at commas, semicolons, slashes, line breaks and "and") are the
  fields asked for, in order, where there are as many; a single field's value is found
  anywhere in its turn ("ok here C4418203");
- a personal field's part is that entity where its value is one
  (:func:`tasks.pii.generic.fields.valid_value`);
- any other field's part is claimed: no finding of a personal type stays inside it (a hotel's
  name, an order date, a ticket number).

A turn whose asked items are not all fields (a sentence, a thanks) asks nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import regex as re

from tasks.pii.clauses import VETO, vetoed
from tasks.pii.filters import spelled_until
from tasks.pii.generic.contact import EMAIL_RE
from tasks.pii.generic.fields import (
    FIELD_NOUNS,
    ROLES,
    key_type,
    name_part,
    name_value,
    norm_key,
    valid_value,
)
from tasks.pii.generic.identifiers import DATE_RE, ID_RE
from tasks.pii.lexicon import alternatives, word_list

if TYPE_CHECKING:
    from presidio_analyzer import RecognizerResult

OTHER = "OTHER"  # a field asked for that is no personal one
_SPEAKERS = frozenset(word_list("asked_speakers")) | ROLES
_CALLING = frozenset(word_list("asked_calling_words"))
_NUMBER = frozenset({"number", "no", "num", "nr"})
_LABEL = re.compile(r"(?m)^[ \t]*(?:\[(?P<b>[\w ]{1,20})\]|(?P<c>\w+(?: \w+)?)[ \t]*:)[ \t]*")
# a chat message as JSON: {"role": "user", "content": "..."} (other keys may stand between)
_MESSAGE = re.compile(
    r'"role"\s*:\s*"(?P<role>\w{1,20})"\s*,(?:\s*"\w+"\s*:\s*(?:"(?:[^"\\]|\\.)*"|[\w.-]+)\s*,)*'
    r'\s*"content"\s*:\s*"(?P<content>(?:[^"\\]|\\.)*)"'
)
_ITEMS = re.compile(r"\s*(?:[,;+&]|\s/\s|\band\b|\bor\b)\s*")
_PARTS = re.compile(r"\s*(?:[,;\n]|\s/\s|\band\b)\s*")
_WORD = re.compile(r"[\p{L}\d]+(?:['’]s)?")
_DETERMINERS = alternatives("asked_determiners")  # "of the traveller", "of each passenger"
_NAME_OF = re.compile(rf"(?i)\bname\s+of\s+(?:{_DETERMINERS})?\s*(\p{{L}}+)")
_BARE_WORDS = 4
_FILLERS = 2  # turns of the other speaker without a value, before the answer
# the findings a part answering another field claims: no personal type stays inside it
_CLAIMED = (
    "PERSON",
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "DATE_OF_BIRTH",
    "ADDRESS",
    "PASSPORT",
    "DRIVER_LICENSE",
    "MEDICAL_ID",
    "BANK_ACCOUNT",
    "CREDIT_CARD",
    "US_SSN",
)
# a sentence that asks: a question, or a request's word
_ASKING = re.compile(rf"(?i)\?\s*$|\b(?:{alternatives('asked_request_words')})\b")
# where an asked item's noun phrase ends: "passport no. for each traveller", "DOB on file"
_AFTER_HEAD = re.compile(
    rf"(?i)\s+(?:{alternatives('asked_phrase_end_words')}|of\s+(?:{_DETERMINERS}))\s+"
)
# a question's opening before what it asks for ("What is your passport number?"): its verb
# would end the item's noun phrase before the noun
_WH_COPULA = re.compile(r"(?i)^(?:what|which)\s+(?:is|are|was|were)\s+")
_POLITE = re.compile(r"(?i)\b(?:please|pls|thanks|thank\s+you)\b")


def _turns(text: str) -> list[tuple[str, int, int]]:
    """``(speaker, start, end)`` of each turn, or none where ``text`` is no conversation: lines
    opening with a speaker's label, or chat messages serialised as JSON (each ``content``
    string after its ``role``, as the chat-completions API and trace exports write them)."""
    messages = [
        (norm_key(m.group("role")), m.start("content"), m.end("content"))
        for m in _MESSAGE.finditer(text)
        if norm_key(m.group("role")) in _SPEAKERS
    ]
    if len({s for s, _a, _b in messages}) >= 2:
        return messages
    labels = [
        (norm_key(m.group("b") or m.group("c")), m.end())
        for m in _LABEL.finditer(text)
        if norm_key(m.group("b") or m.group("c")) in _SPEAKERS
    ]
    if len({s for s, _ in labels}) < 2:
        return []
    ends = [text.rfind("\n", 0, m) + 1 for _s, m in labels[1:]] + [len(text)]
    return [(s, start, end) for (s, start), end in zip(labels, ends, strict=True)]


def _kind(item: str) -> str | None:
    """The field an asked item names: a personal entity, :data:`OTHER`, or ``None``. The head
    noun ends an English noun phrase ("the passenger's name", "product name"), a document's or
    a contact's phrase may stand anywhere in it ("passport no. for each traveller")."""
    thing = _NAME_OF.search(item)
    item = _AFTER_HEAD.split(item, 1)[0]
    words = [w.lower().removesuffix("'s").removesuffix("’s") for w in _WORD.findall(item)]
    if thing:
        return "PERSON" if norm_key(thing.group(1)) in ROLES else OTHER
    if words and words[-1] in ("name", "names"):
        return OTHER if len(words) > 1 and words[-2] in FIELD_NOUNS else "PERSON"
    entity = next(
        (t for n in range(min(4, len(words)), 0, -1) if (t := key_type("_".join(words[-n:])))),
        None,
    )
    if entity:
        return entity
    if _NUMBER.intersection(words) and _CALLING.intersection(words):
        return "PHONE_NUMBER"  # "a number we can ring you on", "number the driver can text"
    return OTHER if any(w in FIELD_NOUNS for w in words[-4:]) else None


def _asked(turn: str) -> list[str]:
    """The fields a turn asks for, in order; empty where it asks for none. Words before the
    first field ("To verify, please confirm name, ...") are the request's."""
    sentences = [s for s in re.split(r"(?<=[.?!])\s+(?=\p{Lu})", turn.strip()) if s]
    asking = [s for s in sentences if _ASKING.search(s)]
    if not asking:
        return []
    ask = _WH_COPULA.sub("", _POLITE.sub(" ", asking[-1].rsplit(":", 1)[-1]).strip())
    kinds = [_kind(item) for item in _ITEMS.split(ask.strip(" ?.!")) if _WORD.search(item)]
    while kinds and kinds[0] is None:
        kinds.pop(0)
    if not kinds or None in kinds:
        return []
    return [k for k in kinds if k is not None]


def _value(kind: str, part: str) -> tuple[int, int] | None:
    """Where in ``part`` the value of a personal ``kind`` is, if it holds one."""
    if kind == "PERSON":
        # the name alone, or spelled out after it ("Quigley, Q as in Queen, U I G L E Y")
        for cut in (len(part), *(m.start() for m in re.finditer(",", part))):
            s, e = name_part(part[:cut])
            if e <= s or part[e:cut].strip(" .!") or not name_value(part[s:e], strong=False):
                continue
            end = spelled_until(part, cut)
            if not part[end:].strip(" .!"):
                return (s, end if end > cut else e)
        return None
    if kind == "EMAIL_ADDRESS":
        m = EMAIL_RE.search(part)
    elif kind == "DATE_OF_BIRTH":
        m = DATE_RE.search(part)
    elif kind in ("PHONE_NUMBER", "ADDRESS"):
        stripped = part.strip()
        start = part.find(stripped)
        ok = bool(stripped) and valid_value(kind, stripped)
        return (start, start + len(stripped)) if ok else None
    else:
        m = next((m for m in ID_RE.finditer(part) if valid_value(kind, m.group())), None)
    if not m or not valid_value(kind, m.group()) or vetoed(VETO, part, m.start()):
        return None  # "yes, and my order number is 548213307"
    return m.span()


def _bare(words: str) -> bool:
    """Whether an answer's part is a value alone, a word or two around it at most (a name of
    two or three words, "it's", "ok here"), not a sentence, which may say what else it is."""
    return len(_WORD.findall(words)) <= _BARE_WORDS


def _read(kinds: list[str], text: str, start: int, end: int) -> list[tuple[int, int, str]] | None:
    """The asked fields found in one answering turn: ``(start, end, kind)``; ``None`` where the
    turn does not answer them (a filler: "one sec")."""
    body = text[start:end]
    if len(kinds) == 1:
        if kinds[0] == OTHER:  # "What's your order number?": the code or date answering it
            m = ID_RE.search(body) or DATE_RE.search(body)
            if not m:
                return None
            bare = _bare(body[: m.start()] + body[m.end() :])  # "it's 561190284"
            return [(start + m.start(), start + m.end(), OTHER)] if bare else []
        found = _value(kinds[0], body)
        return [(start + found[0], start + found[1], kinds[0])] if found else None
    trimmed = body.rstrip()
    cuts = [c for m in _PARTS.finditer(trimmed) for c in m.span()]
    bounds = [0, *cuts, len(trimmed)]
    parts = [(bounds[i], bounds[i + 1]) for i in range(0, len(bounds), 2)]
    parts = [(s, e) for s, e in parts if body[s:e].strip()]
    if len(parts) != len(kinds):
        return None
    out = []
    for kind, (s, e) in zip(kinds, parts, strict=True):
        if kind == OTHER and not _bare(body[s:e]):
            continue  # "my passport is 548213307": a sentence, no other field's value
        value = (0, e - s) if kind == OTHER else _value(kind, body[s:e])
        if value:
            out.append((start + s + value[0], start + s + value[1], kind))
    # a personal field answered, or only other fields asked ("size, colour and SKU?")
    answered = any(kind != OTHER for _s, _e, kind in out) or set(kinds) == {OTHER}
    return out if answered and out else None


def answers(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, kind)`` of each answer to an asked field in ``text`` (see the module):
    a personal entity's value, or :data:`OTHER` for a part that answers another field."""
    turns = _turns(text)
    out: list[tuple[int, int, str]] = []
    for i, (asker, start, end) in enumerate(turns):
        kinds = _asked(text[start:end])
        if not kinds:
            continue
        fillers, rows = 0, 0
        for speaker, s, e in turns[i + 1 :]:
            if speaker == asker or (rows and fillers):
                break
            found = _read(kinds, text, s, e)
            if found:
                out += found
                rows += 1
            elif rows or fillers == _FILLERS:
                break
            else:
                fillers += 1
    return out


def answered(
    text: str, findings: Sequence[RecognizerResult], entities: Sequence[str]
) -> list[RecognizerResult]:
    """``findings`` with the asked personal fields' values added (of the configured
    ``entities``) and the personal findings inside a part that answers another field
    dropped."""
    from presidio_analyzer import RecognizerResult

    found = answers(text) if "\n" in text or '"role"' in text else []
    if not found:
        return list(findings)
    claimed = [(s, e) for s, e, kind in found if kind == OTHER]
    kept = [
        r
        for r in findings
        if not any(s <= r.start and r.end <= e for s, e in claimed) or r.entity_type not in _CLAIMED
    ]
    return kept + [
        RecognizerResult(kind, s, e, 0.6)
        for s, e, kind in found
        if kind != OTHER and kind in entities
    ]
