"""Ten classes through the whole engine, each with its precision side, in sentences written
for this test (none from the corpora):

- the words people put after "it's", "I'm" and "this is" that are no name ("it's public
  anyway", "I'm afraid": spaCy's tagger reads them as adjectives, adverbs or verbs), while a
  lower-case name introduced so is still replaced;
- long numbers that are neither a card nor a phone (epoch times in milli-, micro- and
  nanoseconds in log lines and tool results, message ids, zero-padded counters), while cards
  of every issuer and a phone the writer calls theirs still are;
- numbers read aloud in a voice agent's transcript (a phone, a card, a passport with letters
  read out; a Korean phone in Sino-Korean digits), while menus, counts, order numbers read
  aloud and Korean words made of digit syllables stay;
- personal data in a URL's query, escaped ("?email=ana.lima%40example.org", "name=Ana%20Lima"),
  while a query without any stays as written;
- a passport's number in a file's name ("id_passport_731904268.jpg"), while a form's name
  stays;
- a name spelled out after it ("Mbeki, M as in Mike, B E K I": replaced with its spelling),
  while the names of spelling aids ("P as in Peter") stay;
- a phone asked for by how it is called ("a callback number", "a number the driver can text"),
  while an order or case number answered the same way stays;
- one line opening with a role's label ("Customer: ...") that holds a message, not a name,
  while a name under the label, in any case, is still replaced;
- a system's own numbers that pass the card checksum (a request's, a trace's, a job's, a
  statement's id in log lines and tool results), while a card under a card's, a holder's or a
  qualifier's label ("pan", "customer id", "my new number is") is still replaced;
- measures after a document's word (a photo's "35 45mm", a lookup's "1200ms", a scan's
  "300dpi"), while a passport's number in a log line's path, followed by the status and the
  time the request took, is still replaced."""

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
    ("the card on file is 4906 7903 7742 0875 and it expired", "4906 7903 7742 0875"),
    ("loyalty card number 1733409087025412 please add the points", "1733409087025412"),
    ("UATP 122000000000003 for the corporate booking", "122000000000003"),
    ("Maestro 505431515384 is refused at checkout", "505431515384"),
    ("my number is 07700 900987, call after six", "07700 900987"),
]


SPOKEN_GONE = [
    ("Caller: it's Mbeki, M as in Mike, B E K I", "Mbeki, M as in Mike, B E K I"),
    ("uploaded id_passport_731904268.jpg for the check", "731904268"),
    ("GET /v1/users?email=ana.lima%40example.org&state=open 200 8ms", "ana.lima%40example.org"),
    ("redirect to /track?name=Ana%20Lima&order=5", "Ana%20Lima"),
    ("고객: 제 번호는 공일공 사오육칠 팔구공일 이에요", "공일공 사오육칠"),
    (
        "Caller: best to reach me on oh seven nine double one, triple four, five six seven",
        "oh seven nine double one",
    ),
    (
        "Caller: card is five five seven seven, four six three seven, zero six four three, three zero four four",
        "five five seven seven, four six",
    ),
    ("Caller: passport is G zero four X one one T eight two", "G zero four X"),
    ("Agent: Can I get a callback number?\nCaller: 07911 444567", "07911 444567"),
    ("Agent: what number can the driver text you on?\nCustomer: 0412 777 321", "0412 777 321"),
    ("Customer: kwame mensah", "kwame mensah"),
    ("Passenger: maria de la cruz", "maria de la cruz"),
]

SPOKEN_UNTOUCHED = [
    "Agent: so the voucher is P as in Peter, R for Robert, 5 5?",
    "please fill in passport_form_DS11.pdf and passport-renewal-checklist.docx",
    "GET /api/products?category=garden%20tools&page=3 200 12ms",
    "https://maps.example.com/?q=Victoria%20Station&zoom=14",
    "고객: 이사 가는데 오이 공구 사이즈 좀 알려주세요",
    "Caller: press one for sales, two for support, or stay on the line",
    "Caller: my order number is eight eight one two three four five and it never came",
    "Caller: I've called five six times, the error says four oh four",
    "Agent: Which order number is it about?\nCustomer: 7731004512",
    "Agent: Can I get the case number you were given?\nCustomer: 20240511",
    "Customer: charged twice for one month",
    "Customer: order number 77310045",
    "Caller: reference number 20240511 for the complaint",
    "Customer: booking date 12/03/2025, still not confirmed",
]


def _texts(texts: list[str]) -> list[str]:
    return [r.text for r in anonymize_texts(load_engine(CONFIG), texts)]


def _each(pairs: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """``(text, value, anonymised text)`` of each ``(text, value)`` pair."""
    outs = _texts([text for text, _value in pairs])
    return [(text, value, out) for (text, value), out in zip(pairs, outs, strict=True)]


def test_words_after_an_introduction_and_long_numbers_that_are_no_pii_stay() -> None:
    assert _texts(UNTOUCHED) == UNTOUCHED


def test_names_introduced_in_lower_case_cards_and_phones_are_still_replaced() -> None:
    for text, value, out in _each(GONE):
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


def test_numbers_read_aloud_phones_asked_by_how_they_are_called_and_labelled_names_go() -> None:
    for text, value, out in _each(SPOKEN_GONE):
        assert value not in out, out
        # replaced by a placeholder, what was written before it kept
        assert "<" in out and out.startswith(text[: text.index(value)].rsplit(" ", 1)[0]), out


def test_menus_counts_references_and_messages_under_a_role_label_stay() -> None:
    assert _texts(SPOKEN_UNTOUCHED) == SPOKEN_UNTOUCHED


# Luhn-valid, as one number in ten is by chance
SYSTEM_IDS = [
    "ts=2025-11-04T10:02:11Z level=info request_id=4742078023458889 status=200",
    '{"traceId": "5189438606689283", "spanId": "6563921805169938", "ok": true}',
    "job id 5954826591751816 done, 12 rows written",
    "statement no. 4536831550569639 is ready for October",
    "account statement period 2025-10 is closed",
]
LABELLED_CARDS = [
    ('{"pan": "4742078023458889", "exp": "09/28"}', "4742078023458889"),
    ("customer id 5189438606689283 on the refund form", "5189438606689283"),
    ("my new number is 5954826591751816, the old card was cancelled", "5954826591751816"),
    ("Amex no. 368563950032675 please", "368563950032675"),
]


def test_a_systems_own_numbers_stay_and_cards_under_a_holders_label_go() -> None:
    assert _texts(SYSTEM_IDS) == SYSTEM_IDS
    for text, value, out in _each(LABELLED_CARDS):
        assert value not in out and "<CREDIT_CARD>" in out, (text, out)


# Luhn-valid numbers no card issuer gives (first digits and length, ISO/IEC 7812), beside the
# cards of each scheme written without the word "card"
DEVICE_NUMBERS = [
    "The handset's IMEI is 352916895227263, the insurer needs it for the claim.",
    '{"device": {"model": "Redmi Note 12", "imei": "863828884493206"}}',
    "New SIM ICCID 8982718335130454196 activated, the old one is cancelled.",
    "Our warehouse scanner logged 3105033615095170 twice for the same carton.",
    "Reference 7731 0045 2291 8810 from the bank transfer hasn't shown up",
]
SCHEME_CARDS = [
    ("please charge 4222222222222 for the deposit", "4222222222222"),
    ("amex 378282246310005 exp 09/27", "378282246310005"),
    ("use 30569309025904 (diners) for the hotel", "30569309025904"),
    ("my mastercard is 2223003122003222, the new one", "2223003122003222"),
    ('{"method": "maestro", "number": "6759649826438453"}', "6759649826438453"),
    ("Gift for mum, charge 3590778111180734 this time", "3590778111180734"),
]


def test_device_numbers_stay_and_each_schemes_cards_go() -> None:
    assert _texts(DEVICE_NUMBERS) == DEVICE_NUMBERS
    for _text, value, out in _each(SCHEME_CARDS):
        # fourteen digits read as a Greek number too: typed a card or a phone, it goes
        assert value not in out and ("<CREDIT_CARD>" in out or "<PHONE_NUMBER>" in out), out


# a number with its unit after a document's word measures something; a number in a request's
# path followed by the status and the time it took is still the document's
MEASURES = [
    "Passport photo size 35 45mm, background white, no glasses",
    "passport check took 1200ms on the second try",
    "The licence photo must be under 500 KB and 600x600px.",
    "Driving licence scan: 1200 dpi, 24 bit colour, 3.2MB",
]
LOGGED_PASSPORTS = [
    ("2025-11-03 10:22:41 INFO GET /documents/passport/548213307 200 12ms", "548213307"),
    ("GET /v2/passports/C4T7R2X91 404 3ms", "C4T7R2X91"),
]


def test_measures_stay_and_a_logged_passport_goes() -> None:
    assert _texts(MEASURES) == MEASURES
    for text, value, out in _each(LOGGED_PASSPORTS):
        rest = text[text.index(value) + len(value) :]  # the status and the time it took
        assert value not in out and out.endswith(f"<PASSPORT>{rest}"), (text, out)
