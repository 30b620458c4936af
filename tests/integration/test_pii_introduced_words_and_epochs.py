"""Two precision classes through the whole engine, with their recall side: the words people
put after "it's", "I'm" and "this is" that are no name ("it's public anyway", "I'm afraid",
"this is hopeless": spaCy's tagger reads them as adjectives, adverbs or verbs), while a
lower-case name introduced so is still replaced; and long numbers that are neither a card nor
a phone (epoch times in milli-, micro- and nanoseconds in log lines and tool results, message
ids, zero-padded counters), while cards of every issuer and a phone the writer calls theirs
still are. Sentences written for this test, none from the corpora."""

from __future__ import annotations

import pytest

from infra.settings import CurateSettings
from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine
from tasks.pii.generic.references import epoch_time

pytestmark = pytest.mark.integration

CONFIG = PiiConfig.from_settings(CurateSettings())

UNTOUCHED = [
    "Fair enough, it's expensive but worth it.",
    "I'm sceptical the patch fixed anything.",
    "This is unacceptable, I want to speak to a manager.",
    "Good news, it's repaired now and ships Monday.",
    "I'm abroad until the 20th, please email instead.",
    "Sorry, it's late here, I'll answer tomorrow.",
    "last_seen=1733500012345 status=idle region=eu-west-1",
    '{"updated_at_us": 1733500012345678, "rows": 12}',
    "message 1281234567890123456 was flagged by the filter",
    "replayed from offset 0000441884196235 after the crash",
]

GONE = [
    ("hi it's busisiwe, tracking shows delivered but nothing here", "busisiwe"),
    ("I'm jessica from the Leeds office, the invoice is wrong", "jessica"),
    ("Sorry, it's mehmet again, still no refund", "mehmet"),
    ("the card on file is 4539 1488 0343 6467 and it expired", "4539 1488 0343 6467"),
    ("loyalty card number 1733409087025412 please add the points", "1733409087025412"),
    ("UATP 122000000000003 for the corporate booking", "122000000000003"),
    ("Maestro 505431515384 is refused at checkout", "505431515384"),
    ("my number is 07700 900123, call after six", "07700 900123"),
]


def _texts(texts: list[str]) -> list[str]:
    return [r.text for r in anonymize_texts(load_engine(CONFIG), texts)]


def test_words_after_an_introduction_and_long_numbers_that_are_no_pii_stay() -> None:
    assert _texts(UNTOUCHED) == UNTOUCHED


def test_names_introduced_in_lower_case_cards_and_phones_are_still_replaced() -> None:
    for (text, value), out in zip(GONE, _texts([t for t, _v in GONE]), strict=True):
        assert value not in out, out
        assert out != text


def test_an_epoch_time_is_ten_to_nineteen_digits_of_a_recent_unix_time() -> None:
    assert epoch_time("1733397298")  # seconds, 2024
    assert epoch_time("1733397298063")  # milliseconds
    assert epoch_time("1733397298063123")  # microseconds
    assert epoch_time("1733410116918208219")  # nanoseconds
    assert not epoch_time("1012345678")  # 2002: older than any log line here
    assert not epoch_time("2733397298063")  # 2056
    assert not epoch_time("17333972980")  # eleven digits: no unit of time
    assert not epoch_time("1733 397 298")  # grouped as people group a number
