"""Names in free text found by the words around them, whatever the NER says.

- after a role or relation word: ``customer Dana Whitfield``, ``the tenant is Jean-Baptiste
  Lefèvre``, ``emergency contact is ...``, ``name on the account is ...``, ``booked under
  Abernethy``, ``my son jayden`` (a lower-case name only when the name lexicon knows it);
- after what is for someone (``ORDER FOR CHIDI NWOSU``, ``booking for Anh Vo``): as a
  vocative, below;
- after a request or vocative: ``tell Rosalind``, ``ask for Desmond``, ``ok Maribel,``,
  ``@Rosa`` (a chat mention): a known name, or a proper noun (spaCy's tagger) the NER does not call a
  company, product or place (``tell Alexa`` stays);
- in text written in capitals (``PLEASE CALL BERNADETTE VOSS``): a known given name and the
  word after it;
- airline order in title case (``Dupont/Marie``) when the lexicon knows both parts.
"""

from __future__ import annotations

from typing import Any

import regex as re

from tasks.pii.lexicon import STOP_WORDS, alternatives, word_list
from tasks.pii.names import AMBIGUOUS, NAME_PARTICLES, fold, known, lexicon

# the word after these is a name by definition ("surname LEE", "given SEOYEON")
_NAME_FIELDS = alternatives("name_cues_name_fields")
# a role or relation before a name ("customer Dana Whitfield", "booked under Abernethy")
_ROLE = alternatives("name_cues_roles") + "|" + _NAME_FIELDS
_NAME_FIELD_CUE = re.compile(rf"(?i)(?<![\p{{L}}])(?:{_NAME_FIELDS})\s*[:=]?\s*$")
# a form typed on one line: the next field's label right after a value
_NEXT_LABEL = re.compile(
    rf"(?i)[ \t]*[,;/|]?[ \t]*(?:{_NAME_FIELDS}|"
    r"passport|date\s+of\s+birth|dob|nationality|sex|gender)(?![\p{L}])"
)
_ROLE_CUE = re.compile(
    rf"(?i)(?<![\p{{L}}])(?:{_ROLE})(?:\s*[:,-]\s*|\s+(?:is|was|named|called|here)\s*[:,]?\s*"
    r"|\s+)(?=\S)"
)
# what is for someone: a name, or a day, a place, a product (checked by the weak rule)
_FOR_CUE = re.compile(
    r"(?i)(?<![\p{L}])(?:"
    + alternatives("name_cues_for_things")
    + r")s?\s+(?:is\s+)?for[ \t]+(?=\p{Lu})"
)
# a request or vocative before a name ("tell Rosalind", "ok Maribel,")
_VOCATIVE_CUE = re.compile(
    r"(?<![\p{L}])(?i:" + alternatives("name_cues_vocatives") + r")[ \t]*,?[ \t]+(?=\p{Lu})"
)
# a sign-off, the message's last line: "- Matt", "— Ines Moreau" (the line is the name; a
# bulleted list's "- Store Credit" is not last, or follows another bullet)
_PARTICLE = "(?:" + "|".join(sorted(NAME_PARTICLES, key=len, reverse=True)) + r")[ \t]+"
_NAME_REST = rf"(?:[ \t]+(?:{_PARTICLE}){{0,2}}\p{{Lu}}[\p{{L}}'’.-]*){{1,3}}"
_SIGN_OFF = re.compile(
    r"(?m:(?<!^[ \t]*[-–—~*•][^\n]*\n)^[ \t]*[-–—~][ \t]*)"
    rf"(?=\p{{Lu}}[\p{{L}}'’.-]*(?:{_NAME_REST})?[ \t]*\s*\Z)"
)
_LINE_REST = re.compile(rf"{_NAME_REST}(?=[ \t]*$)", re.M)
_INITIAL = re.compile(r"\p{Lu}\.")
_LEADING_INITIAL = re.compile(r"\p{Lu}\.(?:-\p{Lu}\p{Ll}+)?")  # "J.", "H.-Dieter"
_TITLE_AIRLINE = re.compile(
    r"(?<![\p{L}/])(\p{Lu}\p{Ll}+(?:[-'’]\p{Lu}?\p{Ll}+)*)/(\p{Lu}\p{Ll}+(?:[-'’]\p{Lu}?\p{Ll}+)*)"
    r"(?![\p{L}/])"
)
_MENTION = re.compile(r"(?<![\w.])@(\p{Lu}\p{Ll}+(?:[-'’]\p{Lu}?\p{Ll}+)*)(?![\p{L}\d_.@-])")
# a surname by its form, whatever the tagger reads ("O'Dea" as a plural noun): a capital, an
# apostrophe and a capitalised word (O'Dea, D'Arcy, N'Diaye), or Mc/Mac before one (McCrae)
_SURNAME_FORM = re.compile(r"\p{Lu}['’]\p{Lu}\p{Ll}+|Ma?c\p{Lu}\p{Ll}+")
_MODEL_AFTER = re.compile(r"[-/]?[A-Za-z]*\d")
_CAPS_LINE = re.compile(r"[^\n]+")
# a capital word not glued to digits: "01MAR30" of an airline record is a date, not "Mar"
_CAPS_WORD = re.compile(r"(?<![\p{L}\d'’])\p{Lu}[\p{Lu}'’-]*\p{Lu}(?![\p{L}\d'’])")
# capitalised words that follow "ask for", "customer" or "thanks" and are no one's name
NOT_A_NAME = frozenset(word_list("name_cues_not_a_name"))
_NOT_PERSON_ENT = frozenset(
    [
        "ORG",
        "PRODUCT",
        "GPE",
        "LOC",
        "FAC",
        "NORP",
        "WORK_OF_ART",
        "EVENT",
        "LAW",
        "LANGUAGE",
        "DATE",
        "TIME",
        "MONEY",
    ]
)


def _known(word: str) -> bool:
    """A name the lexicon knows that is not also an ordinary word."""
    w = fold(word.strip("'’-"))
    return known(word) and w not in AMBIGUOUS and w not in STOP_WORDS


def _capitalised(tok: Any) -> bool:
    text = tok.text
    return bool(
        text[:1].isupper()
        and text.replace("'", "").replace("’", "").replace("-", "").isalpha()
        and tok.lower_ not in STOP_WORDS
        and tok.lower_ not in NOT_A_NAME
    )


def _name_end(doc: Any, i: int, *, strong: bool) -> int:
    """The end of the name starting at token ``i`` (``i``: none)."""
    first = doc[i]
    if (
        strong
        and _LEADING_INITIAL.fullmatch(first.text)
        and i + 1 < len(doc)
        and (_capitalised(doc[i + 1]) or _INITIAL.fullmatch(doc[i + 1].text))
    ):  # "customer J. R. Hartley", "customer H.-Dieter Barth"
        rest = _name_end(doc, i + 1, strong=True)
        return rest if rest > i + 1 else i
    if not _capitalised(first):
        if strong and first.is_lower and _known(first.text) and _nominal(first):
            nxt = i + 1
            return (
                nxt + 1 if nxt < len(doc) and doc[nxt].is_lower and _known(doc[nxt].text) else nxt
            )
        return i
    proper = first.tag_ in ("NNP", "NNPS") or first.text.isupper()
    acronym = first.text.isupper() and len(first.text) <= 3
    if not _known(first.text) and (
        acronym or not (proper and (strong or first.ent_type_ not in _NOT_PERSON_ENT))
    ):
        return i
    j = i + 1
    while j < len(doc) and j - i < 5:
        tok = doc[j]
        glued = not doc[j - 1].whitespace_
        if _capitalised(tok) and (
            tok.tag_ in ("NNP", "NNPS")
            or _known(tok.text)
            or glued
            or _SURNAME_FORM.fullmatch(tok.text)
        ):
            j += 1
        elif (
            tok.text in ("-", "'", "’")
            and glued
            and j + 1 < len(doc)
            and (_capitalised(doc[j + 1]) or _initial_then_name(doc, j + 1))
        ):
            j += 2
        elif _initial_then_name(doc, j):  # "John F. Kennedy", "Klaus-D. Ebert"
            j += 1
        elif _particles_then_name(doc, j):  # "Hugo van der Dussen", "Ana de Lacy"
            j = particles_end(doc, j) + 1
        else:
            break
    if j == i + 1 and first.text.isupper() and _caps_given_after_comma(doc, j):
        j += 2  # "PATIENT OKAFOR, NNAMDI": surname, comma, given name
    return j


def _and_name(doc: Any, j: int) -> list[tuple[int, int]]:
    """A second name joined by "and", "or" or "&" to a cued one ("my wife Rosalind and
    Jamie"), read as after a vocative: a known name or a proper noun no company ("customer
    Adaora Nwankwo and Amazon": Amazon stays)."""
    if j + 1 >= len(doc) or doc[j].lower_ not in ("and", "or", "&"):
        return []
    k = _name_end(doc, j + 1, strong=False) if doc[j + 1].text[:1].isupper() else j + 1
    return [(doc[j + 1].idx, doc[k - 1].idx + len(doc[k - 1].text))] if k > j + 1 else []


def _caps_given_after_comma(doc: Any, j: int) -> bool:
    """Whether ``, GIVEN`` follows (capitals, not a stop word, and nothing name-like after
    it): the surname-first order of clinical and airline records."""
    if j + 1 >= len(doc) or doc[j].text != ",":
        return False
    given = doc[j + 1]
    return bool(
        given.text.isupper()
        and given.is_alpha
        and len(given.text) >= 3
        and _capitalised(given)
        and (j + 2 >= len(doc) or doc[j + 2].text != ",")
    )


def _nominal(tok: Any) -> bool:
    """Whether the tagger reads a token as a noun or unknown word, not a verb, adverb or
    function word: "rep said", "the agent will" are no names, however many people are
    called Said or Will."""
    return not tok.tag_.startswith(("VB", "MD", "IN", "RB", "DT", "PRP", "CC", "TO", "W"))


def _initial_then_name(doc: Any, j: int) -> bool:
    """Whether an initial (``D.``) is at ``j`` and a capitalised word follows it."""
    return bool(_INITIAL.fullmatch(doc[j].text) and j + 1 < len(doc) and _capitalised(doc[j + 1]))


def _particles_then_name(doc: Any, j: int) -> bool:
    """Whether one or two name particles start at ``j`` and a capitalised word follows."""
    k = particles_end(doc, j)
    return j < k < len(doc) and _capitalised(doc[k])


def particles_end(doc: Any, j: int, *, limit: int | None = 2, joiners: bool = False) -> int:
    """The index after the name particles starting at token ``j`` ("van der", "de la"; ``j``:
    none): at most ``limit`` of them, in lower case; or any number in any case and hyphens
    glued to the word before ("Ibn-") with ``joiners``, as a proper-noun run is grown."""
    k = j
    while k < len(doc) and (limit is None or k - j < limit):
        tok = doc[k]
        particle = tok.lower_ in NAME_PARTICLES and (joiners or tok.is_lower)
        glued_hyphen = joiners and tok.text == "-" and k > 0 and not doc[k - 1].whitespace_
        if not (particle or glued_hyphen):
            break
        k += 1
    return k


def _title_word(tok: Any) -> bool:
    """Alphabetic in title case (``Else``, ``May``), stop word or not."""
    return bool(tok.is_alpha and tok.text[:1].isupper() and tok.text[1:].islower())


def _word_then_name(doc: Any, i: int) -> bool:
    """Whether a form value opens with a given name that is also a common word (``Else``,
    ``Will``, ``May``) and a name follows it."""
    return _title_word(doc[i]) and i + 1 < len(doc) and _name_end(doc, i + 1, strong=True) > i + 1


def _word_surname(doc: Any, j: int) -> bool:
    """Whether the name before ``j`` ends in a surname that is also a common word (``May``,
    ``Will``: capitalised mid-sentence) closed by punctuation or the end of the text."""
    return bool(
        j < len(doc)
        and _title_word(doc[j])
        and doc[j].lower_ in STOP_WORDS
        and doc[j - 1].whitespace_
        and (j + 1 == len(doc) or doc[j + 1].is_punct)
    )


def _form_value_end(doc: Any, j: int) -> int:
    """After a form label (``Name on the account: Grzegorz auch Schlauchin, ...``) the value
    runs to the field's end: up to two more lower-case words and a capitalised one, or one
    more word in title case ("Régulo Sales,"), when a comma, semicolon, full stop or line end
    closes them; else ``j``."""
    k = j
    while k < len(doc) and k - j < 2 and doc[k].is_lower and doc[k].is_alpha:
        k += 1
    # the label says the field is a name: a word that elsewhere is a team's ("Sales") too
    if k >= len(doc) or not (_capitalised(doc[k]) or k == j and _title_word(doc[k])):
        return j
    closed = k + 1 == len(doc) or doc[k + 1].text in (",", ";", ".") or doc[k + 1].is_space
    return k + 1 if closed else j


def _spans_after(
    doc: Any, cues: re.Pattern[str], text: str, *, strong: bool, line: bool = False
) -> list[tuple[int, int]]:
    """The names right after ``cues``' matches (``strong``: a lower-case lexicon name too;
    ``line``: a name found runs to the end of its line, which the cue says is the name)."""
    starts = {tok.idx: tok.i for tok in doc}
    spans = []
    for m in cues.finditer(text):
        i = starts.get(m.end())
        j = _name_end(doc, i, strong=strong) if i is not None else 0
        if line and i is not None and j == i and _LEADING_INITIAL.fullmatch(doc[i].text):
            j = _name_end(doc, i, strong=True)  # the sign-off line is a name: "— H.-Dieter Lübs"
        if i is not None and j == i and _NAME_FIELD_CUE.search(text, 0, m.end()):
            after = doc[i].idx + len(doc[i].text)
            j = i + 1 if doc[i].is_alpha and _field_name(doc[i].text, text, after) else i
        form = strong and m.group(0).rstrip().endswith((":", "="))
        if i is not None and j == i and form and _word_then_name(doc, i):
            j = _name_end(doc, i + 1, strong=True)  # "Name on the account: Else Budig,"
        if i is not None and j > i and form:
            j = _form_value_end(doc, j)
        if i is not None and j > i and strong and _word_surname(doc, j):
            j += 1  # "for the customer Blanaid May?"
        if i is not None and j > i:
            end = doc[j - 1].idx + len(doc[j - 1].text)
            if line and (rest := _LINE_REST.match(text, end)):
                end = rest.end()
            if not _MODEL_AFTER.match(text, end):  # "my Brother HL-L2350DW" is a printer
                spans.append((doc[i].idx, end))
                spans += _and_name(doc, j)
    return spans


def _field_name(word: str, text: str, end: int) -> bool:
    """The word after "surname", "first name" (ending at ``end``): capitalised; or typed in
    lower case, no English stop word, and known to the name lexicon or followed by the form's
    next label ("surname haddad given names ...")."""
    if word[:1].isupper():
        return True
    if not word.islower() or word in STOP_WORDS or word in AMBIGUOUS:
        return False
    return known(word) or _NEXT_LABEL.match(text, end) is not None


def caps_name_spans(text: str) -> list[tuple[int, int]]:
    """In a line written in capitals: a known given name and the capitalised word after it."""
    firsts, lasts = lexicon()
    spans = []
    for line in _CAPS_LINE.finditer(text):
        letters = [c for c in line.group(0) if c.isalpha()]
        if len(letters) < 8 or sum(c.isupper() for c in letters) < 0.8 * len(letters):
            continue
        words = list(_CAPS_WORD.finditer(text, line.start(), line.end()))
        for k, w in enumerate(words):
            low = fold(w.group(0))
            if low not in firsts or low in AMBIGUOUS or low in STOP_WORDS or len(low) < 3:
                continue
            end = w.end()
            if k + 1 < len(words) and text[w.end() : words[k + 1].start()] == " ":
                nxt = fold(words[k + 1].group(0))
                if nxt not in STOP_WORDS and (nxt in lasts or len(nxt) >= 3):
                    end = words[k + 1].end()
            spans.append((w.start(), end))
    return spans


def cued_name_spans(text: str, nlp_artifacts: Any) -> list[tuple[int, int]]:
    """The names of the module docstring in ``text`` (token rules need spaCy's tokens)."""
    spans = caps_name_spans(text)
    firsts, lasts = lexicon()
    for m in _TITLE_AIRLINE.finditer(text):  # "Dupont/Marie", not "Europe/London"
        surname, given = fold(m.group(1)), fold(m.group(2))
        if (surname in lasts or surname in firsts) and given in firsts and _known(m.group(2)):
            spans.append(m.span())
    for m in _MENTION.finditer(text):
        if m.group(1).lower() not in NOT_A_NAME and m.group(1).lower() not in STOP_WORDS:
            spans.append(m.span(1))
    doc = getattr(nlp_artifacts, "tokens", None)
    if doc is None or not len(doc):
        return spans
    spans += _spans_after(doc, _ROLE_CUE, text, strong=True)
    spans += _spans_after(doc, _VOCATIVE_CUE, text, strong=False)
    spans += _spans_after(doc, _FOR_CUE, text, strong=False)
    spans += _spans_after(doc, _SIGN_OFF, text, strong=False, line=True)
    return spans
