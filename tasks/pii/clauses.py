"""The clause that names a value, and the words that claim it for a thing.

A value is often given as the end of a clause about whose it is ("the passport no. on the
booking is X", "the booking number on my passport renewal is X"): :func:`subject_head` finds
the word that clause's subject is about (the last word of its head that is no filler, or,
where the head is a bare "number", the modifier after its first preposition), and where the
clause only restates the one before ("... is wrong. It should read X", "the ticket number has
a typo, it should be X"), that one's subject. An order, ticket or booking word right before a
value (:func:`vetoed`), before the value it corrects ("order 548213370 instead of X"), or
right after it (:func:`claimed_after`: "X is my ticket number") claims it for a thing; a
subject's noun with a number word of its own ("the appointment number is X") does too
(:func:`own_number`), and a thing's word after a preposition only says where the value stands
("the passport I used for the booking has number X": :func:`claimed_in`).
"""

from __future__ import annotations

import regex as re

from tasks.pii.lexicon import alternatives, word_list, words_pattern

# words that may stand between a cue and its value ("passport number is", "DOB: ")
FILLER = frozenset(word_list("identifiers_filler"))
# a value after these words is an order, ticket or product number, not a personal identifier
_VETO_WORDS = words_pattern("identifiers_things")
VETO = re.compile(rf"(?i)(?<![a-z])(?:{_VETO_WORDS})(?![a-z])")
# the determiners and possessives before the thing's word ("my", "the", "their", "an")
_DETERMINERS = alternatives("clauses_determiners")
# what names a value as one of those right after it: "12345678 is my ticket number"
_CLAIMED_AFTER = re.compile(
    r"(?i)[ \t]*(?:(?:is|was|it'?s|that'?s)\s+|[(\u2013\u2014-][ \t]*)"
    rf"(?:(?:{_DETERMINERS})\s+)?"
    # "... is the number of the parcel"
    rf"(?:(?:number|no\.?|code)\s+(?:of|for|on)\s+(?:(?:{_DETERMINERS})\s+)?)?"
    rf"(?:{_VETO_WORDS})(?![a-z])"
)
# the subject of a clause that names the value: its words, and where the clause ends
_PREPOSITIONS = frozenset(word_list("identifiers_head_prepositions"))
# what opens a relative clause after the subject's noun (its words say nothing of the subject)
_RELATIVE_STARTS = frozenset(word_list("clauses_relative_starts"))
_DETERMINER_WORDS = frozenset(word_list("clauses_determiners"))
_SUBJECT_WORD = re.compile(r"[\p{L}\d'#]+(?:-[\p{L}\d]+)*")
# what ends a clause naming the value: "is", "was", "should be", "should read", ":", "->", "="
COPULA = (
    r"(?:(?<![a-z])(?:(?:is|was)(?:\s+number)?|be|are|were|reads?|ha[sd]\s+(?:the\s+)?(?:number|no\.?))"
    r"|[:=]|->|→)"
)
_NAMES_IT = re.compile(
    rf"(?i)(?:{COPULA}"
    # what a correction names: "please update the passport no on the ticket to ..."
    r"|(?<=(?<![a-z])(?:updat|chang|correct|amend|set|fix)[a-z]*\s[^\n?!]{0,60})(?<![a-z])to)"
    r"\s*[\"'“]?\s*$"
)
# a sentence's end ("no. on the booking" is no end), a line's, or a clause's
SENTENCE_END = r"[?!]\s|\.\s+(?=\p{Lu})|\n"
_CLAUSE_START = re.compile(rf"{SENTENCE_END}|;\s|[,({{\[]")
PREPOSITION_WORDS = "|".join(sorted(_PREPOSITIONS, key=len, reverse=True))
_SUBJECT_SPAN = 200  # characters before the value a subject is looked for in
_VERB_REACH = 32  # characters the longest verb that names a value takes ("has the number")
_VETO_WINDOW = 16
# a subject's noun followed by a number's word has a number of its own ("appointment number")
_OWN_NUMBER = re.compile(r"(?i)[ \t_-]*(?:number|no\b|nr\b|id\b|code|#)")
# a value corrected or doubted by the next: "548213370 instead of ", "14C, not ", "X or maybe "
_CORRECTED = re.compile(
    r"(?<![\w-])[A-Za-z0-9]*\d[A-Za-z0-9-]*[ \t,]+(?:instead\s+of|rather\s+than|not|or(?:\s+maybe)?)"
    r"[ \t]+$"
)
# where a thing only says where the value stands: "on my booking", "for the booking"
_PLACE_PREPOSITIONS = alternatives("clauses_place_prepositions")
_PLACE_DETERMINERS = alternatives("clauses_place_determiners")
_PLACE = re.compile(
    rf"(?i)(?<![a-z])(?:{_PLACE_PREPOSITIONS})\s+(?:(?:{_PLACE_DETERMINERS})\s+)?"
    # one modifier between ("for the ferry booking", "on my new booking")
    rf"(?:[a-z]+\s+)?(?:{_VETO_WORDS})(?![a-z])"
)
# the nouns and qualifiers before a number word that keep the number a card's or a person's
# ("card number", "national id", "the right number"), no thing's of its own
HOLDER_WORDS = frozenset(word_list("label_holders") + word_list("label_qualifiers"))
# a clause that only restates the one before it ("It should read", "the correct one is")
_AUXILIARIES = frozenset(word_list("clauses_auxiliaries"))
_RESTATING = frozenset(word_list("clauses_restating")) | _AUXILIARIES
_NO_HEAD = FILLER | _AUXILIARIES  # no word a subject is about
# the verb that ends the clause restated ("... is wrong", "... has a typo")
_COPULAS = alternatives("clauses_copulas")
_VERB = re.compile(rf"(?i)(?<![a-z])(?:{_COPULAS})(?![a-z])")


def claimed_after(text: str, end: int) -> bool:
    """What follows a value ending at ``end`` names it an order, ticket or booking number."""
    return _CLAIMED_AFTER.match(text, end) is not None


def subject_head(text: str, start: int, *, modifiers: bool = True) -> int | None:
    """Where the word starts that the subject of the clause ending just before ``start`` is
    about, when that clause names the value ("... is", ":", "should read"): the last word of
    its head that is not a filler ("number", "no.", "my"), or, where the head is fillers only
    ("the number"), the last such word of the modifier after its first preposition ("on the
    ticket"; not with ``modifiers`` False). None where no clause names the value or its
    subject is fillers only."""
    span = subject_span(text, start)
    return None if span is None else head_in(text, span, modifiers=modifiers)


def head_in(text: str, span: tuple[int, int], *, modifiers: bool = True) -> int | None:
    """Where the word starts that the subject's words at ``span`` (:func:`subject_span`) are
    about (see :func:`subject_head`)."""
    words = _before_relative(list(_SUBJECT_WORD.finditer(text, *span)))
    segments: list[list[re.Match[str]]] = [[]]
    for word in words:
        if word.group(0).lower() in _PREPOSITIONS:
            segments.append([])
        else:
            segments[-1].append(word)
    for segment in segments if modifiers else segments[:1]:
        for word in reversed(segment):
            if word.group(0).lower().rstrip(".") not in _NO_HEAD:
                return word.start()
    return None


def _before_relative(words: list[re.Match[str]]) -> list[re.Match[str]]:
    """The subject's words up to a relative clause after its noun: a relative pronoun, a
    pronoun or a determiner right after a noun phrase a determiner opened, none of these
    words nor a preposition before it ("the licence number | that I gave", "the reference |
    the office gave me"; not "the number of | my passport", "please update | the flight")."""
    opened = False  # a determiner has opened a noun phrase
    for i, match in enumerate(words):
        word = match.group(0).lower().split("'")[0]
        before = words[i - 1].group(0).lower() if i else ""
        if opened and word in _RELATIVE_STARTS and before not in _RELATIVE_STARTS | _PREPOSITIONS:
            return words[:i]
        opened = opened or word in _DETERMINER_WORDS
    return words


def _verb_at(text: str, lo: int, end: int) -> int:
    """Where the subject ends when a clause in brackets or between commas stands between it
    and its verb at ``end`` ("my passport (the new one) is", "the number of my passport,
    which I renewed in March, is"); ``end`` otherwise."""
    before = text[lo:end].rstrip()
    if before.endswith(")"):
        opened = text.rfind("(", lo, lo + len(before))
        return opened if opened > lo else end
    if before.endswith(","):
        comma = lo + len(before) - 1
        opened = text.rfind(",", lo, comma)
        inserted = text[opened + 1 : comma]
        if opened > lo and _SUBJECT_WORD.search(inserted) and not re.search(SENTENCE_END, inserted):
            return opened
    return end


def subject_span(text: str, start: int) -> tuple[int, int] | None:
    """Where the subject's words are of the clause naming the value at ``start`` (see
    :func:`subject_head`; a clause in brackets or between commas before the verb is not
    the subject's), the clause before it where this one only restates it."""
    lo = max(0, start - _SUBJECT_SPAN)
    # the clause's verb ends where the value's quotes and spaces begin: looked for only there
    verb_end = lo + len(text[lo:start].rstrip().rstrip("\"'\u201c").rstrip())
    ending = _NAMES_IT.search(text, max(lo, verb_end - _VERB_REACH), start)
    if ending is None:
        return None
    end = _verb_at(text, lo, ending.start())
    starts = list(_CLAUSE_START.finditer(text, lo, end))
    begin = starts[-1].end() if starts else lo
    words = [w.group(0).lower() for w in _SUBJECT_WORD.finditer(text, begin, end)]
    if starts and words and all(w in _RESTATING for w in words):
        before = starts[-2].end() if len(starts) > 1 else lo
        verb = _VERB.search(text, before, starts[-1].start())
        if verb is not None:
            return before, verb.start()
    return begin, end


def subject_word(text: str, start: int, *, modifiers: bool = True) -> str:
    """The word :func:`subject_head` finds, lower-cased ("" where none)."""
    head = subject_head(text, start, modifiers=modifiers)
    return "" if head is None else word_at(text, head)


def own_number(text: str, head: int) -> bool:
    """The subject's word at ``head`` has a number word of its own ("appointment number"; not
    a holder's or a qualifier's: "national id", "the right number")."""
    word = word_at(text, head)
    return word not in HOLDER_WORDS and _OWN_NUMBER.match(text, head + len(word)) is not None


def claimed_in(gap: str, reach: int = 25) -> bool:
    """A thing's word in the last ``reach`` characters of ``gap`` (the words between a cue and
    its value) claims the value, unless it only says where the value stands ("for the
    booking")."""
    return VETO.search(_PLACE.sub(" ", gap)[-reach:]) is not None


def word_at(text: str, start: int) -> str:
    """The subject word starting at ``start``, lower-cased."""
    return str(_SUBJECT_WORD.match(text, start).group(0)).lower()


def vetoed(pattern: re.Pattern[str] | None, text: str, start: int) -> bool:
    """An order/tracking word shortly before the value, in the same sentence, or before the
    value it corrects ("order 548213370 instead of 548213307")."""
    if pattern is None:
        return False
    lo = max(0, start - _VETO_WINDOW)
    stop = max(text.rfind(c, lo, start) for c in ".?!\n")
    if pattern.search(text, max(lo, stop + 1), start) is not None:
        return True
    pair = _CORRECTED.search(text, max(0, start - 60), start)
    return pair is not None and vetoed(pattern, text, pair.start())
