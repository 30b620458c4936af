"""Korean names in the shapes issue 43 saw survive (given names alone, names before honorifics
and particles, romanised names, names in tool results, a name repeated later in the text),
and the Korean text that must stay as it is (adjectives before 고객님, what people call each
other, product names in a ``name`` field, service lines and order numbers)."""

from __future__ import annotations

import pytest

from tasks.pii.korean import load_kiwi
from tasks.pii.korean.address import address_spans
from tasks.pii.korean.ids import id_spans
from tasks.pii.korean.names import korean_name_spans
from tasks.pii.korean.not_personal import not_personal


def _names(text: str) -> list[str]:
    return [text[s:e] for s, e in korean_name_spans(text, load_kiwi().tokenize)]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        # given names alone, before a vocative, the familiar 이, a particle, or nothing at all
        ("서진아 택배 왔어", ["서진"]),
        ("조카 다솜이한테 선물로 보냈어요", ["다솜"]),
        ("하윤이랑 시우랑 같이 가요", ["하윤", "시우"]),
        ("어제 윤호 봤어?", ["윤호"]),
        ("한결 씨가 전화했어요", ["한결"]),
        ("하늘 씨 오늘 출근하셨어요?", ["하늘"]),
        # names before honorifics and particles kiwi does not read as one word
        ("조은비 님의 문의 건입니다", ["조은비"]),
        ("김솔잎님이 남긴 후기", ["김솔잎"]),
        # a CI run's canary: kiwi reads 남은지 as 남/VV 은/ETM 지/NNB ("whether left")
        ("남은지님, 주문하신 상품이 발송되었습니다.", ["남은지"]),
        ("남은지 님, 문의하신 내용 확인했습니다", ["남은지"]),
        ("남은영님, 주문하신 상품이 발송되었습니다.", ["남은영"]),  # 남/VV 은/ETM 영/NNG
        ("오준영님, 주문하신 상품이 발송되었습니다.", ["오준영"]),  # 오/IC 주/VV ㄴ/ETM
        ("손수빈 고객님의 생년월일은", ["손수빈"]),  # 손수/MAG 비/VA ㄴ/ETM
        # a 1,000-seed sweep's canary: kiwi reads 구성진 as the adjective 구성지/VA ㄴ/ETM
        # ("mellow"), but no adjective's modifier takes 님 glued to it
        ("구성진님, 주문하신 상품이 발송되었습니다.", ["구성진"]),
        # a CI canary (seed 6170): after 저는, kiwi reads 남은서 as 남/VV 은/ETM 서/NNG
        ("안녕하세요, 저는 남은서입니다. 연락처는 010-1234-5678이고", ["남은서"]),
        ("저는 남은주입니다.", ["남은주"]),
        # canaries of 2,000-seed sweeps: 조지아 (조 + 지아) is also Georgia; kiwi reads 안선영
        # as 안/MAG 서/VV ㄴ/ETM 영/NNG
        ("안녕하세요, 저는 조지아입니다. 연락처 알려드릴게요", ["조지아"]),
        ("제 이름은 조지아예요", ["조지아"]),
        ("안녕하세요, 저는 안선영입니다. 연락처는 아래에", ["안선영"]),
        ("저는 안선영이에요", ["안선영"]),
        ("남궁선 님께 전달했어요", ["남궁선"]),
        ("류하람 주임한테 넘겼습니다", ["류하람"]),
        ("양지수(jisu@example.com)님 초대", ["양지수"]),
        ("아들 송지환 계정이에요", ["송지환"]),
        # romanised and Latin-script names in Korean text
        ("통역은 Nguyen Thi Lan 씨가 해요", ["Nguyen Thi Lan"]),
        ("탑승객 JUNG/HANEUL 좌석 변경", ["JUNG/HANEUL"]),
    ],
)
def test_names_in_the_shapes_issue_43_saw_survive(text: str, names: list[str]) -> None:
    assert _names(text) == names


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("로그 customer_name=장이안 channel=kakao", ["장이안"]),
        ('{"guest": {"last_name": "CHO", "first_name": "HAYOON"}} 확인', ["CHO", "HAYOON"]),
        ('{"passenger": "KIM/MINSEO", "seat": "32A"} 좌석', ["KIM/MINSEO"]),
        ('{"ship_to": {"name": "박서진", "zip": "04524"}} 배송지', ["박서진"]),
        (
            "회원 목록\n이름,등급\n문서후,골드\n남도하,일반\n누가 더 오래됐나요?",
            ["문서후", "남도하"],
        ),
        ("| 이름 | 등급 |\n|---|---|\n| 오태양 | 실버 |", ["오태양"]),
        ("CSV: 이름,연락처\n전가온,x", ["전가온"]),
    ],
)
def test_names_in_tool_results_under_a_name_field_or_column(text: str, names: list[str]) -> None:
    assert _names(text) == names


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("김민지 고객님 주문입니다. 민지 님께 문자 드렸어요", ["김민지", "민지"]),
        ("딸 이서윤 계정인데 서윤이 폰이 고장났어요", ["이서윤", "서윤"]),
        ("Kim Jiho 님 체크인. Jiho 님 조식 포함", ["Kim Jiho", "Jiho"]),
        ("담당 최도현 과장입니다. 최 과장님께 연락 주세요", ["최도현", "최"]),
        ("지환이가 비번을 잊었대요. 송지환 계정이에요", ["지환", "송지환"]),
    ],
)
def test_a_name_found_once_is_replaced_everywhere_in_the_text(text: str, names: list[str]) -> None:
    assert _names(text) == names


@pytest.mark.parametrize(
    "text",
    [
        "소중한 고객님께 드리는 혜택",
        "구성진 목소리로 노래했다",  # the adjective itself, no 님
        "여보야 오늘 저녁 뭐 먹을까",
        "수박 씨 빼고 잘라 주세요",
        '{"name": "무선 이어폰", "qty": 1}',
        "상품명,수량\n무선 마우스,2\n네, 확인했어요",
        "신라면 Shin Ramyun 멀티팩",
        "학교 선배 결혼식 선물",
        # a modifier glued to its noun as a word of its own stays
        "저희 집에서 제일 작은방입니다.",
        "이건 남은거예요.",
        # a spaced 안 is the adverb; the 전 of 대전 is no self-introduction before a district
        "저는 안 간 곳이 없어요",
        "대전 유성구 쪽 AS 센터 있나요",
    ],
)
def test_adjectives_address_terms_and_products_are_not_names(text: str) -> None:
    assert _names(text) == []


@pytest.mark.parametrize(
    ("text", "value", "entity"),
    [
        ("고객센터 1670-0876 으로 전화", "1670-0876", "PHONE_NUMBER"),
        ("대표전화 1644-8282 말고", "1644-8282", "PHONE_NUMBER"),
        ("1577 1255 로 전화했더니", "1577 1255", "PHONE_NUMBER"),
        ("무료수신거부 080-870-1234", "080-870-1234", "BANK_ACCOUNT"),
        ("CJ대한통운 송장 567812349012 조회", "567812349012", "PHONE_NUMBER"),
        ("2024061298765 주문 건 환불", "2024061298765", "BANK_ACCOUNT"),
        ("v1.10.2.3 업데이트 후", "1.10.2.3", "IP_ADDRESS"),
        # a company's line by the word before it, whatever its prefix
        ("본사 대표번호 031-8765-4321 로 문의", "031-8765-4321", "PHONE_NUMBER"),
        ("서비스센터: 02-3210-9876", "02-3210-9876", "PHONE_NUMBER"),
        ("택배 배송 조회 번호 3456-7890-1234", "3456-7890-1234", "BANK_ACCOUNT"),
    ],
)
def test_service_lines_order_numbers_and_versions_are_no_ones(
    text: str, value: str, entity: str
) -> None:
    start = text.index(value)
    assert not_personal(text, start, start + len(value), entity)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("주문자 연락처 010-2345-6789", "010-2345-6789"),
        ("고객 번호 02-555-1234", "02-555-1234"),
        ("고객센터 상담원이 010-7788-1234 로 전화 달래요", "010-7788-1234"),
    ],
)
def test_a_personal_phone_after_an_order_word_stays_a_phone(text: str, value: str) -> None:
    start = text.index(value)
    assert not not_personal(text, start, start + len(value), "PHONE_NUMBER")


def test_an_order_number_is_not_an_account_nor_an_address() -> None:
    assert id_spans("2024061298765 주문 건 환불 처리됐나요") == []
    assert address_spans("주문 번호가 1234-5678-9012 인데") == []
    street = "경기도 고양시 일산동구 중앙로 1275번길 38-10"
    assert street in [street[s:e] for s, e, _ in address_spans(street)]


def test_a_bare_name_field_of_a_customer_record_is_a_person_even_when_it_reads_as_a_word() -> None:
    """황미정 (미정: "undecided") under ``name`` beside an e-mail and a phone: the hourly
    canary check leaked it in 8 runs of 100 (CSV rows and ``ship_to.name``)."""
    from tasks.pii.korean.name_fields import field_spans

    csv = "order_id,name,email,phone\nA-1,황미정,a@b.kr,010-1234-5678"
    doc = '{"ship_to": {"name": "최미정"}, "email": "a@b.kr", "phone": "010-1234-5678"}'
    assert [csv[s:e] for s, e in field_spans(csv, lambda w: True)] == ["황미정"]
    assert [doc[s:e] for s, e in field_spans(doc, lambda w: True)] == ["최미정"]
    product = '{"name": "미정", "sku": "B-77"}'  # no record around it: a word stays a word
    assert field_spans(product, lambda w: True) == []


def test_a_ten_digit_phone_starting_with_82_is_not_a_korean_service_line() -> None:
    """``Call me on 8216210432``: read as +82 1621-0432 (a business line) and kept."""
    from tasks.pii.korean.not_personal import service_line

    assert not service_line("8216210432")
    assert service_line("1588-1234") and service_line("+82 1588-1234")
