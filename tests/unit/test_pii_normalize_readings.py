"""The normalisation stage on numbers read aloud as a voice agent's speech-to-text writes them
(a run of digit words read as its digits, offsets mapped back onto the words; short runs and
sentences that only count left alone), in English and Korean, and on a URL's escapes (read as
what they encode in URL tokens only), and on a document's number in a file's name. Sentences
written for this test, none from the corpora."""

from __future__ import annotations

import pytest

from tasks.pii.normalize import normalize


def _read(text: str) -> str:
    return normalize(text).text


# (text, what the recognisers read), one class after another
READ = [
    # English numbers read aloud
    ("call me on oh seven seven double oh nine oh oh one two three", "call me on 07700900123"),
    ("it's triple five, zero one nine eight, two two", "it's 555-0198-22"),
    ("SSN one two three, four five, six seven eight two", "SSN 123-45-6782"),
    ("Five Four Eight two one three three zero seven", "548213307"),
    ("passport C zero one X zero zero T four seven please", "passport C01X00T47 please"),
    ("licence M O R G A seven five three one one six S M nine I J", "licence MORGA753116SM9IJ"),
    ("ref 77 three one zero zero four five", "ref 77310045"),
    # Korean numbers read aloud
    ("고객: 공일공 사오육칠 팔구공일 이요", "고객: 010-4567-8901 이요"),
    ("집 번호 공삼일, 칠칠칠, 일이삼사", "집 번호 031-777-1234"),
    ("주민번호 구일공이일사 이삼사오육칠팔", "주민번호 910214-2345678"),
    ("번호 공일공구팔칠육오사삼이", "번호 01098765432"),
    # a URL's escapes
    (
        "GET /v1/users?email=ana.lima%40example.org&x=1",
        "GET /v1/users?email=ana.lima@example.org&x=1",
    ),
    ("/track?name=Ana%20Lima&order=5", "/track?name=Ana Lima&order=5"),
    ("/find?customer=Ana+Lima", "/find?customer=Ana Lima"),
    ("?q=%EA%B9%80%EB%AF%BC%EC%A4%80", "?q=김민준"),
    # a document's number in a file's name
    ("saved as id_passport_731904268.jpg", "saved as id_passport 731904268 jpg"),
    ("Passport731904268.pdf", "Passport 731904268 pdf"),
    ("/kyc/licence-back-D44X90Q.png here", "/kyc/licence back D44X90Q png here"),
    ("renamed to passport-H5521907", "renamed to passport H5521907"),
]

KEPT = [
    # short runs, counts and typed digits
    "press one for billing, two for support, or nine to repeat",
    "I need two or three more boxes, maybe four",
    "the error says four oh four then five oh three",
    "the flight is B A one one seven leaving at five thirty",
    "it cost nine ninety nine plus shipping",
    "five six seven I think one two three four",
    "the one on file, and the other one too",
    "548 213 307 as typed with spaces",  # digits typed, not read: left as the user wrote them
    # Korean words made of digit syllables
    "이사 가는데 오이 공구 사이즈 좀 알려주세요",
    "구사일생으로 살았네요",
    "주문번호는 칠칠일이삼사오 이에요",  # seven syllables in one group: no phone read so
    "일번은 결제, 이번은 배송, 삼번은 상담원 연결입니다",
    # escapes and plus signs that are no URL query's
    "mongodb+srv://svc@db.example.net/x",
    "the sale is 50%20 off",
    "/logs?line=%FF%FE",  # no UTF-8
    # keys and file names without a document's number
    '{"passport_number": "731904268"}',
    "passport-renewal-checklist.docx",
    "invoice_2024_0042.pdf",
]


@pytest.mark.parametrize(("text", "read"), READ)
def test_what_is_written_another_way_is_read_as_what_it_stands_for(text: str, read: str) -> None:
    assert _read(text) == read
    norm = normalize(text)  # the whole reading maps back onto the whole text
    assert norm.original_span(0, len(norm.text)) == (0, len(text))


@pytest.mark.parametrize("text", KEPT)
def test_counts_words_typed_digits_and_keys_stay_as_written(text: str) -> None:
    assert _read(text) == text


def test_the_digits_map_back_onto_the_words_they_were_read_from() -> None:
    text = "my number is oh seven seven double oh nine oh oh one two three, thanks"
    norm = normalize(text)
    start = norm.text.index("07700900123")
    s, e = norm.original_span(start, start + len("07700900123"))
    assert text[s:e] == "oh seven seven double oh nine oh oh one two three"
    # a letter ending the number after a comma opens the next clause
    spelled = "passport C zero one X zero zero T four seven, C as in cat"
    assert _read(spelled) == "passport C01X00T47, C as in cat"
