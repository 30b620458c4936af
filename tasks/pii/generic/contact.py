"""Contact details and cards as people write them: an offline e-mail validator (tldextract on
its bundled suffix list), a Luhn-checked card pattern for any issuer, phone numbers (NANP,
international, national trunk-0, bare digit runs, and Presidio's phonenumbers matcher run only
on phone-like stretches) and UK National Insurance numbers."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import regex as re

from tasks.pii.span_recognizer import pattern_recognizer

_CARD = r"(?<![\d-])\d(?:[ .-]?\d){11,18}(?![\d-])"
# North-American numbers as written by people and CRMs: 001-/+1 prefixes, dots, extensions
_NANP = (
    r"(?<![\w+])(?:(?:\+|00)?1[ .-]?)?\(?[2-9]\d{2}\)?[ .-]?\d{3}[ .-]\d{4}"
    r"(?:\s?(?:x|ext\.?)\s?\d{1,5})?(?!\d)"
)
# any three-digit area code, as people write it, even one the NANP validator rejects
_NANP_ANY = r"(?<![\w+])(?:\(\d{3}\)\s?|\d{3}[.-])\d{3}[ .-]\d{4}(?![\d-])"
# UK National Insurance numbers, reserved prefixes (ZZ, the test prefix) and any suffix too
_NINO = r"(?<![\w-])[A-Z]{2} ?\d{2} ?\d{2} ?\d{2} ?[A-Z](?![\w-])"
# after "00" at least eight more digits: "case 00418227" is a zero-padded reference
_INTL = r"(?<![\w+])(?:\+|00(?=(?:[ .()-]?\d){8}))[1-9]\d{0,2}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?!\d)"
_PHONEISH = re.compile(r"(?<![\w+])[+(]?\d[\d ().\-/]{5,}\d(?:\s?(?:x|ext\.?)\s?\d{1,5})?")
_NOT_PHONE = re.compile(r"^\d{3}-\d{2}-\d{4,6}$")  # SSN and account-number shapes
PHONE_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "IE", "CA", "AU", "IN", "BR", "IL", "KR")

# national numbers with a trunk 0 ("(0141) 496 0621") and bare 10-15 digit runs
_NATIONAL = r"(?<![\w+])\(?0\d{2,4}\)?[ -]?\d{3,4}[ -]?\d{3,4}(?!\d)"
_BARE_DIGITS = r"(?<![\w+.-])\d{10,15}(?![\w.-])"


def luhn_ok(digits: str) -> bool:
    """The Luhn checksum of a card number (separators ignored)."""
    nums = [int(c) for c in digits if c.isdigit()]
    total = 0
    for i, d in enumerate(reversed(nums)):
        total += (d * 2 - 9 if d * 2 > 9 else d * 2) if i % 2 else d
    return len(nums) >= 12 and total % 10 == 0


# Presidio's e-mail pattern without "/", "=", "?" and "&" in the local part: RFC 5322 allows
# them, but in text they are a URL's ("...?email=jane.doe@example.com" is an address after
# the "=", not one from the host on)
_EMAIL_LOCAL = r"[!#$%'*+\-^_`{|}~\w]"
_EMAIL_PATTERN = (
    rf"\b(({_EMAIL_LOCAL}|{_EMAIL_LOCAL}[!#$%'*+\-^_`{{|}}~\.\w]{{0,}}{_EMAIL_LOCAL})"
    r"[@]\w+(?:-+\w+)*(?:\.\w+(?:-+\w+)*)+)\b"
)
# the one e-mail token every reader of a value looks for in it (an asked-for answer, a form
# field's text that goes on after the address, a name field with its address beside it)
EMAIL_RE = re.compile(_EMAIL_PATTERN)


def offline_email_recognizer() -> type:
    """Presidio's e-mail recogniser, its domain checked against the bundled suffix list, its
    local part without a URL's marks."""
    from presidio_analyzer import Pattern
    from presidio_analyzer.predefined_recognizers import EmailRecognizer

    extractor = _offline_tldextract()

    class OfflineEmailRecognizer(EmailRecognizer):
        PATTERNS = [Pattern("Email (Medium)", _EMAIL_PATTERN, 0.5)]

        def validate_result(self, pattern_text: str) -> bool:
            return bool(extractor(pattern_text.rsplit("@", 1)[-1]).fqdn)

    return OfflineEmailRecognizer


def luhn_card_recognizer(language: str) -> Any:
    """Card numbers of any issuer, 12 to 19 digits, Luhn-valid."""
    return pattern_recognizer(
        "CREDIT_CARD", _CARD, 0.6, "LuhnCardRecognizer", language=language, valid=luhn_ok
    )


def digit_run_phone_recognizer(language: str) -> Any:
    """Phone numbers typed as one run of 10 to 15 digits: a run of eleven digits or more that
    starts with no trunk 0 is a country code and its number, so it is one only where that
    country's numbering plan has numbers of that length ("447700900123" is, a handset's IMEI
    "352916895227263" or a 15-digit asset tag is not: phonenumbers' possible lengths)."""
    return pattern_recognizer(
        "PHONE_NUMBER", _BARE_DIGITS, 0.4, "DigitRunRecognizer", language=language, valid=_run
    )


def _run(digits: str) -> bool:
    return len(digits) <= 10 or digits[0] == "0" or _possible(digits)


def _possible(digits: str) -> bool:
    """``digits`` are a country code and a number of a length its plan allows."""
    import phonenumbers

    try:
        return phonenumbers.is_possible_number(phonenumbers.parse("+" + digits, None))
    except phonenumbers.NumberParseException:
        return False


def candidate_phone_recognizer(language: str) -> Any:
    """Presidio's phonenumbers matcher on phone-like stretches, for :data:`PHONE_REGIONS`."""
    from presidio_analyzer.predefined_recognizers import PhoneRecognizer

    cls = _candidate_phone_recognizer(PhoneRecognizer)
    return cls(supported_regions=PHONE_REGIONS, supported_language=language)


# (entity, regex, score, recogniser name) of the phone and NINO shapes
NANP_ANY = ("PHONE_NUMBER", _NANP_ANY, 0.45, "AnyAreaPhoneRecognizer")
NINO = ("UK_NINO", _NINO, 0.5, "UkNinoRecognizer")
PHONES = (
    ("PHONE_NUMBER", _NANP, 0.5, "NanpPhoneRecognizer"),
    ("PHONE_NUMBER", _INTL, 0.5, "IntlPhoneRecognizer"),
    ("PHONE_NUMBER", _NATIONAL, 0.4, "NationalPhoneRecognizer"),
)


def _candidate_phone_recognizer(base: type) -> type:
    import phonenumbers
    from presidio_analyzer import EntityRecognizer

    class CandidatePhoneRecognizer(base):  # type: ignore[misc,valid-type]
        """Presidio's phonenumbers matcher, run only on phone-like stretches of the text
        (scanning whole texts once per region is the analyzer's costliest step)."""

        def analyze(
            self,
            text: str,
            entities: list[str],  # noqa: ARG002
            nlp_artifacts: Any = None,  # noqa: ARG002 - Presidio passes every argument by name
        ) -> list:
            results = []
            for cand in _PHONEISH.finditer(text):
                digits = sum(c.isdigit() for c in cand.group(0))
                if not 7 <= digits <= 15 or _NOT_PHONE.match(cand.group(0)):
                    continue
                for region in self.supported_regions:  # first region that parses it wins
                    found = [
                        _Span(cand.start() + m.start, cand.start() + m.end)
                        for m in phonenumbers.PhoneNumberMatcher(
                            cand.group(0), region, self.leniency
                        )
                    ]
                    results += [self._get_recognizer_result(s, text, region, None) for s in found]
                    if found:
                        break
            return list(EntityRecognizer.remove_duplicates(results))

    return CandidatePhoneRecognizer


@dataclass(frozen=True)
class _Span:
    start: int
    end: int


@lru_cache(maxsize=1)
def _offline_tldextract() -> Any:
    """tldextract on its bundled public-suffix snapshot: no fetch, no cache directory."""
    import tldextract

    return tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)
