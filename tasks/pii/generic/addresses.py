"""Street addresses as people type them: house number, street name in any case, a street
suffix, then what follows it (unit, city, state and ZIP or a UK postcode), PO boxes, and
unit-first forms ("Flat 3, 12 Baker Street"), and addresses that open with the house, plot
or room and run through locality, landmark and city ("House No. 112, Ngong Road, opposite
the petrol station, Nairobi", "Room 1203, No. 88 Century Avenue, Pudong New District,
Shanghai"), and Japanese block addresses ("2-14-7 Higashi-Azabu, Minato-ku, Tokyo
106-0044"). A street name is at most four words, none an English stop word ("3 kids in the
park" is no address). A full postcode that points at a handful of doors (UK ``M20 2XY``,
Irish Eircode ``D04 E6P2``, Canadian ``H3B 1H7``) is an address with the comma-separated
place, street and unit parts written before it ("Unit 3B, Riverside Business Park, Cork T12
W8CX")."""

from __future__ import annotations

import regex as re

from tasks.pii.lexicon import STOP_WORDS, alternatives, word_list

# what ends a street's name: a street type in any case, a place's word only capitalised
_SUFFIX = (
    "|".join(word_list("addresses_street_types"))
    + "|(?-i:"
    + "|".join(word_list("addresses_place_types"))
    + ")"
)
# a unit's word ("apt", "suite", "block") and its number
_UNIT = (
    rf"(?:{alternatives('addresses_unit_words')}|#)"
    # its number holds a digit or is one letter ("Flat 3B", "Block C"; not "flat is")
    r"\.?\s*#?\s*(?:(?=[\w/-]{0,5}\d)[\w/-]{1,6}|[A-Za-z](?![\w]))"
)
# Australian states before their four-digit postcode ("Fitzroy VIC 3065")
_AU_STATE = rf"(?:{alternatives('addresses_au_states')})"
# a city of up to three words; a state's letters before a postcode are not one of them
_CITY = r"\p{Lu}[\p{L}'.-]*(?:\s(?![A-Z]{2,3}\s+\d)\p{Lu}[\p{L}'.-]*){0,2}"
_POSTCODE = r"(?:\d{5}(?:-\d{4})?|[A-Z]{1,2}\d[A-Z\d]?\s?\d[A-Z]{2}|[A-Z]\d[A-Z]\s?\d[A-Z]\d)"
# the place after a street: a city (Dublin's with its postal district, "Dublin 2"), a state
# or province, a postcode; or, all in lower case, an Australian suburb, state and postcode
_PLACE = (
    r"(?i:\s+\p{L}+(?:\s\p{L}+)?\s+(?:nsw|vic|qld|tas|act)\s+\d{4}(?!\w))"
    rf"|(?-i:(?:,?\s+{_CITY}(?:\s\d{{1,2}}W?(?=[,\n]|\s*$))?)?"
    rf"(?:,?\s+(?:{_AU_STATE}\s+\d{{4}}|[A-Z]{{2}}))?(?:,?\s+{_POSTCODE})?(?![\w]))"
)
# a compass point after the street's type ("Main St NE", "King Street West")
_DIRECTION = alternatives("addresses_directions")
_STREET = re.compile(
    rf"(?i)(?:(?:{_UNIT}),?\s+){{0,2}}(?<![\w.-])(?P<num>\d{{1,6}}[a-z]?(?:[-/]\d{{1,5}}[a-z]?)?)\s+"
    rf"(?P<name>(?:[\p{{L}}\d'.-]+\s+){{1,4}}?)(?:{_SUFFIX})(?![\p{{L}}])\.?"
    rf"(?:\s+(?:{_DIRECTION})\.?(?![\w]))?"
    rf"(?:,?\s*{_UNIT}(?![\w]))?(?:{_PLACE})?"
)
# words that introduce an address; the address runs to the end of the sentence or line:
# "I live at", "my shipping address is", "ship it to"
_ADDRESS_KIND = alternatives("addresses_address_kinds")
_SENDING = alternatives("addresses_sending_verbs")
_CUE = re.compile(
    r"(?i)(?<![a-z])(?:live[sd]?\s+at|living\s+at|reside\s+at|"
    rf"(?:{_ADDRESS_KIND})\s+address(?:\s+is)?|address\s*(?:is|:)|"
    rf"(?:{_SENDING})(?:ed)?\s+(?:it\s+|this\s+|them\s+|the\s+\w+\s+)?to|"
    r"located\s+at|moved\s+to|staying\s+at|my\s+(?:new\s+|old\s+)?place\s+is|c/o)\s*:?\s*"
)
# a line break, "!", "?", ";", or a full stop after no abbreviation ("St.") or initial
_SENTENCE_END = re.compile(
    rf"\n|[!?;]|(?<!\b(?:{alternatives('addresses_abbreviations')}|[A-Z]))\.(?=\s|$)"
)
# a date, a time, an order or a price after the cue: no address
_NOT_ADDRESS = re.compile(
    rf"(?i)(?<![a-z])(?:{alternatives('addresses_not_address_words')}|\$|%)(?![a-z])|@|\d:\d"
)
# no street suffix, but a tail only addresses have: "4021 Calle Ocho, Miami, FL 33135",
# "Via Garibaldi 8, 16124 Genova", "8 Avenue Foch, 75116 Paris", "Isisbaan 540, 9447 VR"
_WORD = r"\p{L}[\p{L}'.-]*"
_TAILED = re.compile(
    rf"(?<![\w-])(?:\d{{1,5}}[a-z]?\s+(?:{_WORD}\s){{0,3}}{_WORD}|(?:{_WORD}\s){{0,3}}{_WORD}\s\d{{1,5}}[a-z]?(?:/\d+)?)"
    # a Polish flat after the house number: "Marszałkowska 84/92 m. 15"
    rf"(?:\s+(?:m|lok)\.\s?\d{{1,4}})?"
    rf"(?:,\s*\d{{1,2}}\s?[º°ªoa]\s?[A-Za-z]?\.?)?"  # a Spanish floor and door: "3º B" (NFKC: "3o B")
    rf"(?:,\s*(?:{_WORD}\s?){{1,3}},?\s+[A-Z]{{2}}\s+\d{{5}}(?:-\d{{4}})?"
    # a postcode then the town: "16124 Genova", "9447 VR Assen", Polish "00-514 Warszawa"
    rf"|,\s*(?:[A-Z]{{1,2}}-)?(?:\d{{4,5}}|\d{{2}}-\d{{3}})(?:\s?[A-Z]{{2}})?,?\s+\p{{Lu}}[\p{{L}}-]+(?:\s\p{{Lu}}[\p{{L}}-]+)?"
    # an Irish county: "3 The Green, Bray, Co. Wicklow"
    rf"|(?:,\s*(?:{_WORD}\s?){{1,3}})?,\s*Co\.?\s+\p{{Lu}}\p{{L}}+)(?![\w])"
)
# full postcodes, written with their space: UK, Irish Eircode (routing key + unique
# identifier: one dwelling), Canadian
_FINE_POSTCODE = re.compile(
    r"(?<![\w-])(?:[A-Z]{1,2}\d[A-Z\d]?\s(?![1-9][GMKT]B)\d[ABD-HJLNP-UW-Z]{2}"
    r"|(?:[AC-FHKNPRTV-Y]\d{2}|D6W)\s[0-9AC-FHKNPRTV-Y]{4}"
    r"|[ABCEGHJ-NPRSTVXY]\d[ABCEGHJ-NPRSTV-Z]\s\d[ABCEGHJ-NPRSTV-Z]\d)(?![\w-])"
)
# one comma-separated part before a postcode: "Co. Clare", "Dublin 4", "Unit 3B", "5 Ash Grove"
_PART_BEFORE = re.compile(
    r"(?:(?<=^|[\s,:;(-])(?:\d{1,5}[a-z]?\s+)?(?:\p{Lu}[\p{L}'.-]*|\d{1,3}[A-Z]?)"
    r"(?:\s+(?:\p{Lu}[\p{L}'.-]*|\d{1,5}[A-Z]?|of|the|upon|on))*"
    rf"|(?i:{alternatives('addresses_part_units')})\.?\s*#?\s*[\w-]{{1,6}})[,\s]*$"
)
# PO boxes and their kin (GPO Box, Locked/Private Bag, a rural route's box) with their place
_PO_BOX = re.compile(
    r"(?i)(?<![\w])(?:(?:g\.?\s?p\.?\s?o\.?|p\.?\s?o\.?|post\s+office|locked|private)\s+(?:box|bag)"
    r"|rr\s?\d{1,3}\s+box)\s+\d{1,6}(?![\w])"
    rf"(?-i:(?:,?\s+{_CITY})?(?:,?\s+(?:{_AU_STATE}\s+\d{{4}}|[A-Z]{{2}}))?(?:,?\s+(?:{_POSTCODE}|\d{{4}}))?(?![\w]))?"
)
_UNIT_START = re.compile(rf"(?i){_UNIT}\s")
# an address that opens with its house, plot or flat and runs through comma-separated parts:
# locality, landmark, city, PIN ("House No. 112, Ngong Road, opposite Total petrol station,
# Nairobi", "No. 45/2, 3rd Cross, Indiranagar, Bengaluru 560038", "Blk 5 Lot 12, Mabuhay
# St., Brgy. San Isidro, Quezon City 1103", "Plot 27, Admiralty Way, Lekki Phase 1, Lagos")
_HOUSE = (
    rf"(?i:(?:{alternatives('addresses_house_words')})\.?\s*"
    r"(?:no\.?\s*)?#?\s*|no\.\s*)"
    r"(?:\d[\w/-]{0,6}|(?-i:[A-Z])(?![\w]))"
)
_PART = (
    rf"(?:(?i:{alternatives('addresses_landmark_words')})\s+"
    r"(?:[\p{L}\d'&.-]+\s?){1,5}"
    r"|(?:\d{1,4}(?:st|nd|rd|th)?\s+)?\p{Lu}[\p{L}'.-]*(?:\s+(?:\p{Lu}[\p{L}'.-]*|\d{1,6}|of))*"
    r"|\d{4,6})"
)
_MARKED = re.compile(
    rf"(?<![\w-]){_HOUSE}(?:,?\s+(?i:lot|blk|block|flat|floor|wing)\s*[\w-]{{1,5}})*"
    rf"(?:,\s*{_PART}){{2,6}}"
)
# a street or a locality word in one of those parts: they name a place, not a product
_LOCALITY = re.compile(rf"(?i)(?<![a-z])(?:{alternatives('addresses_locality_words')})(?![a-z])")
# a Japanese block address: chome-ban-go, the district, the ward (-ku) or town (-shi, -cho,
# -machi, -gun), the city and a postcode ("2-14-7 Higashi-Azabu, Minato-ku, Tokyo 106-0044")
_JP_TOWN = alternatives("addresses_japanese_municipality_suffixes")  # "-ku", "-shi", "-cho"
_JP_PREFECTURE = alternatives("addresses_japanese_prefecture_suffixes")  # "-to", "-fu", "-ken"
_JAPANESE = re.compile(
    r"(?<![\w-])\d{1,2}-\d{1,3}(?:-\d{1,4})?,?\s+\p{Lu}\p{Ll}+(?:-\p{Lu}?\p{Ll}+)*"
    r",\s*\p{Lu}\p{Ll}+-(?:" + _JP_TOWN + r")"
    r"(?:,?\s+\p{Lu}\p{Ll}+(?:-(?:shi|" + _JP_PREFECTURE + r"))?){0,2}"
    r"(?:,?\s+(?:〒\s?)?\d{3}-\d{4})?(?![\w-])"
    # or from the postcode down: "〒106-0044 Tokyo, Minato-ku, Higashi-Azabu 2-14-7"
    r"|(?<![\w-])(?:(?:〒\s?)?\d{3}-\d{4},?\s+)?"
    r"(?:\p{Lu}\p{Ll}+(?:-(?:" + _JP_PREFECTURE + r"))?,\s*)?"
    r"\p{Lu}\p{Ll}+-(?:" + _JP_TOWN + r"),\s*\p{Lu}\p{Ll}+(?:-\p{Lu}?\p{Ll}+)*,?\s+"
    r"\d{1,2}-\d{1,3}(?:-\d{1,4})?(?![\w-])"
)


def street_address_spans(text: str, _nlp: object = None) -> list[tuple[int, int]]:
    """Spans of street addresses and PO boxes in ``text``."""
    spans = [(m.start(), m.end()) for m in _PO_BOX.finditer(text)]
    for m in _STREET.finditer(text):
        words = m.group("name").lower().split()
        if any(w in STOP_WORDS and w not in ("n", "s", "e", "w") for w in words):
            continue
        if not any(c.isalpha() for c in m.group("name")):
            continue
        spans.append((m.start(), m.end()))
    for m in _TAILED.finditer(text):
        street = m.group(0).split(",")[0]
        if any(w[:1].isupper() for w in street.split() if not w[:1].isdigit()):
            spans.append((m.start(), m.end()))
    spans += [m.span() for m in _MARKED.finditer(text) if _LOCALITY.search(m.group(0))]
    spans += [m.span() for m in _JAPANESE.finditer(text)]
    return spans + _cued_spans(text) + _postcode_spans(text)


def _postcode_spans(text: str) -> list[tuple[int, int]]:
    """A full postcode with up to four comma-separated parts before it on its line (the last
    part, with the town, is the postcode's own line: "Cork T12 W8CX")."""
    spans = []
    for m in _FINE_POSTCODE.finditer(text):
        start = m.start()
        line_start = text.rfind("\n", 0, start) + 1
        for _ in range(4):
            part = _PART_BEFORE.search(text, line_start, start)
            if part is None or part.start() == start:
                break
            start = part.start()
            if text[line_start:start].rstrip()[-1:] != ",":
                break
        spans.append((start, m.end()))
    return spans


def _cued_spans(text: str) -> list[tuple[int, int]]:
    """An address after "I live at", "ship it to", "address:": to the end of the sentence,
    with a number in it and a comma or a leading number, no date, time or order words."""
    spans = []
    for cue in _CUE.finditer(text):
        start = cue.end()
        end_m = _SENTENCE_END.search(text, start, start + 140)
        end = end_m.start() if end_m else min(len(text), start + 140)
        value = text[start:end].rstrip(" ,")
        if not 6 <= len(value) <= 120 or not any(c.isdigit() for c in value):
            continue
        leading = value[:1].isdigit() or _UNIT_START.match(value)  # "flat 4 22 hill road"
        if _NOT_ADDRESS.search(value) or not ("," in value or leading):
            continue
        spans.append((start, start + len(value)))
    return spans
