"""What the Korean recognisers find in the shapes people type, and what they leave alone
(regions, order/tracking/model numbers, prices, appointment dates, ordinary words)."""

from __future__ import annotations

import pytest

from tasks.pii.korean import load_kiwi
from tasks.pii.korean.address import address_spans
from tasks.pii.korean.ids import id_spans, rrn_checksum_ok
from tasks.pii.korean.names import korean_name_spans
from tasks.pii.normalize import normalize


def _ids(text: str) -> dict[str, str]:
    """``{value: entity}`` of the identifiers found in ``text`` (the surest reading of each)."""
    found = sorted(id_spans(text), key=lambda hit: hit[3])
    return {text[s:e]: t for s, e, t, _score in found}


def _names(text: str) -> list[str]:
    return [text[s:e] for s, e in korean_name_spans(text, load_kiwi().tokenize)]


@pytest.mark.parametrize(
    ("text", "value", "entity"),
    [
        ("주민번호 950301.1234567 맞나요", "950301.1234567", "KR_RRN"),
        ("주민등록번호 : 920817 - 2345671", "920817 - 2345671", "KR_RRN"),
        ("주민등록번호 ８５０６２３－１５２３４１８ 로", "８５０６２３－１５２３４１８", "KR_RRN"),
        ("외국인등록번호 901225 - 5123456", "901225 - 5123456", "KR_FRN"),
        ("주민번호 앞 6자리 + 뒤 1자리: 990909-2", "990909-2", "KR_RRN"),
        ("여권번호 M12345678 로", "M12345678", "PASSPORT"),
        ("새 여권 M123A4567 형식", "M123A4567", "PASSPORT"),
        ("미국 여권 번호는 548213907 입니다", "548213907", "PASSPORT"),
        ("면허증 번호 서울 12-345678-90 이에요", "서울 12-345678-90", "DRIVER_LICENSE"),
        ("면허 번호 부산 09 123456 55 입니다", "부산 09 123456 55", "DRIVER_LICENSE"),
        ("생년월일: 1990년 3월 5일", "1990년 3월 5일", "DATE_OF_BIRTH"),
        ("생년월일 900305 / 성별 남", "900305", "DATE_OF_BIRTH"),
        ("저 1993년 7월 12일생이에요", "1993년 7월 12일", "DATE_OF_BIRTH"),
        ("저 1992-05-30 생이에요", "1992-05-30", "DATE_OF_BIRTH"),
        ("(010)1234-5678 로 연락", "(010)1234-5678", "PHONE_NUMBER"),
        ("+82 10-5521-8830 으로", "+82 10-5521-8830", "PHONE_NUMBER"),
        ("010.7731.4402 로 문자", "010.7731.4402", "PHONE_NUMBER"),
        ("국민은행123-45-678901로 입금", "123-45-678901", "BANK_ACCOUNT"),
        ("신한 110 482 339012 로 부탁", "110 482 339012", "BANK_ACCOUNT"),
        ("케이뱅크100123456789로 보낼게요", "100123456789", "BANK_ACCOUNT"),
        ("서버 192.168.0.1에서 접속", "192.168.0.1", "IP_ADDRESS"),
        ("VPN 켜면 2404:6800:4004:81b::200e 로 잡혀요", "2404:6800:4004:81b::200e", "IP_ADDRESS"),
        ("차량번호 12가3456 등록", "12가3456", "KR_CAR_PLATE"),
        ("서울12가3456 이 제 차", "서울12가3456", "KR_CAR_PLATE"),
        ("환자번호 20231145 로 예약", "20231145", "MEDICAL_ID"),
        ("비번은 qwer1234! 이에요", "qwer1234!", "SECRET"),
        ("abc.def@naver.com으로 보내주세요", "abc.def@naver.com", "EMAIL_ADDRESS"),
    ],
)
def test_identifiers_in_the_shapes_people_type(text: str, value: str, entity: str) -> None:
    assert _ids(text).get(value) == entity, _ids(text)


@pytest.mark.parametrize(
    "text",
    [
        "태블릿 주문번호 2024031512345 배송 조회",
        "송장번호 6892 1234 5678 로 조회",
        "모델명 SM-X710N 호환 케이스",
        "가격은 129,000원이고 배송비 3,000원",
        "3월 5일 오후 2시로 예약 변경",
        "펌웨어 1.2.3.4 버전으로 업데이트",
        "2024-06-14 생산 제품이에요",
        "고객센터 1588-1234 로 전화",
        "비밀번호 변경은 어디서 하나요?",
    ],
)
def test_order_numbers_prices_dates_and_versions_are_not_identifiers(text: str) -> None:
    assert _ids(text) == {}


def test_the_rrn_is_found_with_and_without_a_valid_check_digit() -> None:
    assert rrn_checksum_ok("880214-1048213") is False
    assert _ids("주민번호 880214-1048213")["880214-1048213"] == "KR_RRN"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("래미안아파트 101동 1203호로 보내주세요", "래미안아파트 101동 1203호"),
        ("롯데캐슬 3동 502호 앞에 놔주세요", "롯데캐슬 3동 502호"),
        ("잠실엘스 5동 1101호로", "잠실엘스 5동 1101호"),
        ("행복빌라 202호 문앞에", "행복빌라 202호"),
        ("주소: 서울시 강남구 테헤란로 123, 4층", "서울시 강남구 테헤란로 123, 4층"),
        ("이모 주소 경기도 성남시 분당구 판교역로 235 에이치스퀘어 N동 8층 맞지?",
         "경기도 성남시 분당구 판교역로 235 에이치스퀘어 N동 8층"),
    ],
)  # fmt: skip
def test_addresses_with_or_without_a_street(text: str, value: str) -> None:
    assert value in [text[s:e] for s, e, _ in address_spans(text)]


@pytest.mark.parametrize(
    "text",
    ["서울에서 부산까지", "경기도 성남시 분당구 쪽 매장", "에어팟 프로 2세대", "강남역 2번 출구"],
)
def test_regions_and_products_are_not_addresses(text: str) -> None:
    assert address_spans(text) == []


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("지수야 내일 몇 시에 만나?", ["지수"]),
        ("민준이가 오늘 결석했어요", ["민준"]),
        ("서연이랑 같이 가도 돼요?", ["서연"]),
        ("하은이한테 물어보니까", ["하은"]),
        ("김민수 씨 계신가요?", ["김민수"]),
        ("박지영님 주문하신 상품", ["박지영"]),
        ("이순자 여사님께서 오신대요", ["이순자"]),
        ("홍길동 명의로 된 계좌", ["홍길동"]),
        ("저희 어머니 박순례 께서 주문", ["박순례"]),
        ("성함이 김 민 수 맞으신가요", ["김 민 수"]),
        ("저 장 혁이에요", ["장 혁"]),
        ("예약자 HONG GILDONG 으로", ["HONG GILDONG"]),
        ("영문이름 Gil-dong Hong 으로", ["Gil-dong Hong"]),
        ('{"user_name": "강다니엘", "tel": "x"}', ["강다니엘"]),
        ("진아 엄마 생신이", ["진아"]),
        ("외국인 고객 성명 Nguyen Van An, 여권 C1234567", ["Nguyen Van An"]),
        ("Hi 저 Jenny 인데요 번호는", ["Jenny"]),
        ("어제 정국이가 놀러왔었어", ["정국"]),
        ("할아버지(최불암)께서 입원하셨어요", ["최불암"]),
        ("예금주 명 : 남궁민", ["남궁민"]),
    ],
)
def test_korean_names_as_people_write_them(text: str, names: list[str]) -> None:
    assert _names(text) == names


@pytest.mark.parametrize(
    "text",
    [
        "고객님 배송지 변경은 마이페이지에서",
        "이체 완료했는데 언제 확인되나요?",
        "태블릿 화면이 자꾸 꺼져요",
        "중국 상하이로 EMS 보내면",
        "서울 강남구 맛집 추천",
        "엄마 나 오늘 늦어",
        "도착 예정이 11/28 로",
        "상담원 연결 부탁드려요",
    ],
)
def test_ordinary_words_and_places_are_not_names(text: str) -> None:
    assert _names(text) == []


def test_chat_jamo_survive_normalisation_so_the_name_before_them_is_read() -> None:
    text = "ㅎㅇ 나 민지ㅋㅋ 내번호 바꼈어"
    norm = normalize(text).text
    assert norm == text
    assert _names(norm) == ["민지"]
