"""Korean personal data for Presidio (``language='ko'``): names from kiwipiepy's proper-noun tags
and the way Koreans write them (glued to a particle: ``김상호이고``, ``배은지입니다``), resident
registration numbers (Presidio's checksum-validated recogniser plus the shape and the masked
forms people type, ``840512-1******``), business registration numbers, mobile and landline
numbers, bank accounts next to particles and road/lot addresses (시/도, 구/군, 로/길 + number).

Patterns here never rely on ``\\b``: a digit followed by a Hangul particle (``...5678로``) is no
word boundary, so every pattern uses digit look-arounds instead. The Korean pipeline is
tokenizer-only spaCy (``blank:xx``) for Presidio plus kiwipiepy for morphology; a missing
kiwipiepy is a :class:`MissingDependencyError` naming the packages.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any

import regex as re

from infra.errors import MissingDependencyError
from tasks.curate.span_recognizer import pattern_recognizer, person_recognizer

HANGUL = re.compile(r"[\p{Hangul}]")
# the 60 most frequent surnames cover >99 % of Koreans; two-syllable ones first
_SURNAMES = (
    "남궁|황보|제갈|선우|독고|사공|서문|"
    "김|이|박|최|정|강|조|윤|장|임|한|오|서|신|권|황|안|송|전|홍|유|고|문|양|손|배|백|허|남|"
    "심|노|하|곽|성|차|주|우|구|민|류|나|진|지|엄|채|원|천|방|공|현|함|변|염|여|추|도|소|석|"
    "선|설|마|길|연|위|표|명|기|반|라|왕|금|옥|육|인|맹|제|모|탁|국|어|은|편|용|예|경|봉|사|부|"
    "황|가|복|태|목|형|피|두|감|음|빈|동|온|호|범|좌|팽|승|간|상|갈|서|단|견|당"
)
# what follows a name: particles, copula, honorifics and sign-offs
_NAME_AFTER = (  # not the case particles (은/는/을/를...): every noun takes those
    r"(?:입니다|이고|이구요|이에요|예요|이예요|이라고|라고|이라는|라는|씨|님|고객|회원|드림|올림|배상|"
    r"입니당)"
)
_NAME_CUE = re.compile(
    rf"(?<![\p{{Hangul}}])((?:{_SURNAMES})[\p{{Hangul}}]{{1,2}})(?={_NAME_AFTER}|\s+(?:고객|드림|올림|배상|님|씨)|\s*$)"
)
_INTRO = re.compile(
    r"(?:저는|제\s?이름은|이름은|성함은|담당자|상담원|고객명|예금주|수신인|받는\s?분|보내는\s?분|"
    r"수고하십니다\.?|안녕하세요[,.]?|감사합니다\.?)\s*"
    rf"((?:{_SURNAMES})[\p{{Hangul}}]{{2}})(?=$|[^\p{{Hangul}}]|{_NAME_AFTER})"
)
_PLACE_END = ("시", "도", "구", "군", "동", "읍", "면", "리", "로", "길", "가", "역", "산", "강")

# --- identifiers (digit look-arounds, never \b) --------------------------------------------
_RRN_SHAPE = r"(?<![\d-])\d{6}[- ]?[1-8]\d{6}(?![\d-])"
_RRN_MASKED = r"(?<![\d-])\d{6}[- ]?(?:[1-8][*xX●]{6}|[*xX●]{7})"
_BRN = r"(?<![\d-])\d{3}-\d{2}-\d{5}(?![\d-])"
_MOBILE = r"(?<![\d+-])(?:\+82[ -]?1[016789]|01[016789])[ .-]?\d{3,4}[ .-]?\d{4}(?![\d-])"
_LANDLINE = (
    r"(?<![\d+-])(?:\+82[ -]?(?:2|[3-6][1-5]|70)|0(?:2|[3-6][1-5]|70|50\d?|80))"
    r"[ .)-]?\d{3,4}[ .-]?\d{4}(?![\d-])"
)
_ACCOUNT = r"(?<![\d-])\d{2,6}(?:-\d{2,7}){1,3}(?![\d-])"
_DIGITS = r"(?<![\d.-])\d{10,16}(?![\d.-])"
# addresses: 시/도 and 구/군 then a road (…로/길/…가 + number) or a lot (…동/리 + number)
_REGION = r"(?:[\p{Hangul}]+(?:특별시|광역시|특별자치시|특별자치도|도|시|군|구)\s+){1,4}"
_ROAD = (
    r"[\p{Hangul}\d]*[\p{Hangul}](?:\d+(?:번)?)?(?:대로|로|길|\d+가|(?<=[\p{Hangul}]{2})가)"
    r"\s?(?:지하\s?)?\d{1,5}(?:-\d{1,4})?"
    r"(?:\s?\([\p{Hangul}\d ,]+\))?(?![\d]|번|개|명|일|분|원|회|월|년|차|시간|가지|%|층|점|등)"
)
_LOT = (
    r"[\p{Hangul}]+(?:동|리)\s?\d{1,5}(?:-\d{1,4})?(?:번지)?(?![\d]|번|개|명|일|분|원|회|월|년|차)"
)
_REGION_ONLY = r"(?:[\p{Hangul}]+(?:특별시|광역시|특별자치시|특별자치도|도))\s+[\p{Hangul}]+(?:시|군|구)(?:\s+[\p{Hangul}]+(?:구|군))?"


def has_hangul(text: str) -> bool:
    """Whether the Korean pipeline applies to ``text``."""
    return bool(HANGUL.search(text))


@lru_cache(maxsize=1)
def load_kiwi() -> Any:
    """kiwipiepy's analyser with its bundled model (loaded once per process, offline).

    Raises:
        MissingDependencyError: kiwipiepy or kiwipiepy-model is not installed.
    """
    try:
        from kiwipiepy import Kiwi

        return Kiwi()
    except ImportError as exc:
        raise MissingDependencyError(
            "the Korean PII pipeline (FLYWHEEL_CURATE__LANGUAGES has 'ko') needs kiwipiepy "
            "and kiwipiepy-model: `pip install kiwipiepy kiwipiepy-model`"
        ) from exc
    except Exception as exc:  # kiwipiepy without its model raises on construction
        raise MissingDependencyError(
            f"kiwipiepy cannot load its model ({type(exc).__name__}); "
            "install it with `pip install kiwipiepy-model`"
        ) from exc


def rrn_checksum_ok(value: str) -> bool:
    """The resident registration number check digit (numbers issued before October 2020)."""
    digits = [int(c) for c in value if c.isdigit()]
    if len(digits) != 13:
        return False
    total = sum(
        d * w for d, w in zip(digits[:12], (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5), strict=True)
    )
    return (11 - total % 11) % 10 == digits[12]


def build_korean_recognizers(language: str, common: list[Any]) -> list[Any]:
    """Presidio recognisers for Korean text: ``common`` (e-mail, cards, IBAN, IP, URL and the
    custom patterns, built by :func:`tasks.curate.recognizers.build_recognizers`) plus the
    Korean identifiers, phones, accounts, addresses and names."""
    from presidio_analyzer import Pattern, PatternRecognizer
    from presidio_analyzer.predefined_recognizers import KrBrnRecognizer, KrRrnRecognizer

    load_kiwi()  # fail at engine construction, naming the package, not mid-batch

    pattern = partial(pattern_recognizer, language=language)

    class RrnShapeRecognizer(PatternRecognizer):
        """Any 6+7 digit shape: a valid check digit scores 1.0, an invalid one stays a
        likely RRN (people mistype, generators ignore the checksum)."""

        def validate_result(self, pattern_text: str) -> bool | None:
            return True if rrn_checksum_ok(pattern_text) else None

    class DigitCountRecognizer(PatternRecognizer):
        """Hyphenated digit groups of 10-16 digits: bank accounts as banks print them."""

        def validate_result(self, pattern_text: str) -> bool:
            return 10 <= sum(c.isdigit() for c in pattern_text) <= 16

    lang: dict[str, Any] = {"supported_language": language}
    return [
        *common,
        KrRrnRecognizer(**lang),
        KrBrnRecognizer(**lang),
        RrnShapeRecognizer(
            supported_entity="KR_RRN",
            name="KrRrnShapeRecognizer",
            patterns=[Pattern("RRN shape", _RRN_SHAPE, 0.6)],
            **lang,
        ),
        pattern("KR_RRN", _RRN_MASKED, 0.6, "KrRrnMaskedRecognizer"),
        pattern("KR_BRN", _BRN, 0.5, "KrBrnShapeRecognizer"),
        pattern("PHONE_NUMBER", _MOBILE, 0.7, "KrMobileRecognizer"),
        pattern("PHONE_NUMBER", _LANDLINE, 0.6, "KrLandlineRecognizer"),
        DigitCountRecognizer(
            supported_entity="ACCOUNT_NUMBER",
            name="KrAccountRecognizer",
            patterns=[Pattern("account groups", _ACCOUNT, 0.45)],
            **lang,
        ),
        pattern("ACCOUNT_NUMBER", _DIGITS, 0.4, "KrDigitRunRecognizer"),
        pattern("LOCATION", _REGION + "(?:" + _ROAD + "|" + _LOT + ")", 0.7, "KrAddressRecognizer"),
        pattern("LOCATION", _ROAD, 0.5, "KrRoadRecognizer"),
        pattern("LOCATION", _REGION_ONLY, 0.5, "KrRegionRecognizer"),
        _kiwi_name_recognizer()(**lang),
    ]


def korean_name_spans(text: str) -> list[tuple[int, int]]:
    """Spans of Korean names: kiwipiepy proper nouns that look like a person's name (a surname
    and one or two syllables, not a place), names before a particle, honorific or sign-off,
    and names after an introduction cue ("저는", "담당자", "예금주")."""
    spans = []
    surname = re.compile(rf"^(?:{_SURNAMES})[\p{{Hangul}}]{{1,2}}$")
    for token in load_kiwi().tokenize(text):
        if token.tag == "NNP" and surname.match(token.form) and not token.form.endswith(_PLACE_END):
            spans.append((token.start, token.start + token.len))
    for regex in (_NAME_CUE, _INTRO):
        for m in regex.finditer(text):
            name = m.group(1)
            if len(name) == 2 and regex is _NAME_CUE:
                continue  # two syllables before a particle: too many ordinary words
            spans.append((m.start(1), m.end(1)))
    return spans


def _kiwi_name_recognizer() -> type:
    return person_recognizer(
        name="KoreanNameRecognizer",
        score=0.6,
        spans=lambda text, _nlp: sorted(set(korean_name_spans(text))) if has_hangul(text) else [],
        doc="Korean person names (see :func:`korean_name_spans`).",
    )
