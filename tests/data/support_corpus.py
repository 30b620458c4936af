"""Support-ticket corpora for the languages and gaps of issue 17, generated with Faker at test
time (fixed seed; nothing personal is stored in the repository).

- :func:`korean`: Faker ``ko_KR`` names (often glued to their particle: ``김상호이고``,
  ``배은지입니다``), resident registration numbers (plain and in the masked forms people type),
  mobile and landline numbers, cards, e-mails, bank accounts next to particles, business
  registration numbers and road addresses, in Korean support-ticket sentences.
- :func:`english_gaps`: ``en_US``/``en_GB`` names written lower-case in greeting and sign-off
  positions, single first names, UK National Insurance numbers and phone numbers whose area
  code a validator rejects.

Each has a ``"dev"`` and a ``"heldout"`` template family (disjoint phrasings; the held-out one
is only ever measured), like :mod:`tests.data.pii_corpus`.
"""

from __future__ import annotations

import random

from tests.data.pii_corpus import Family, LabelledText

KO_DEV: dict[str, list[str]] = {
    "PERSON": [
        "안녕하세요, 저는 {v}입니다.",
        "{v}이고 지난주에 주문했습니다.",
        "담당자 {v}님께 연락 부탁드립니다.",
        "제 이름은 {v}예요.",
    ],
    "RRN": ["주민등록번호는 {v}입니다.", "주민번호 {v} 로 조회해 주세요."],
    "PHONE": ["연락처는 {v}입니다.", "{v}로 전화 주세요."],
    "CARD": ["카드번호 {v}로 결제했는데 두 번 청구됐어요.", "{v} 카드로 환불해 주세요."],
    "EMAIL": ["메일은 {v}로 보내 주세요.", "이메일: {v}"],
    "ACCOUNT": ["환불 계좌는 {v}입니다.", "계좌번호 {v}로 입금해 주세요."],
    "BRN": ["사업자등록번호 {v}로 세금계산서 발행 부탁드립니다."],
    "ADDRESS": ["주소는 {v}입니다.", "{v}로 배송해 주세요."],
}
KO_HELDOUT: dict[str, list[str]] = {
    "PERSON": [
        "수고하십니다. {v}라고 합니다.",
        "{v} 고객입니다, 연말정산 서류 문의드려요.",
        "어제 {v}씨가 상담해 주셨어요.",
        "감사합니다. {v} 드림",
        "{v}이고 회원가입이 안 돼요.",
    ],
    "RRN": ["본인확인용 주민등록번호: {v}", "제 주민번호가 {v}인데 맞나요?"],
    "PHONE": ["휴대폰 {v} 으로 문자 주세요.", "사무실 번호는 {v}이에요."],
    "CARD": ["결제 카드 {v}을 해지하고 싶어요.", "신용카드({v}) 승인 취소 요청합니다."],
    "EMAIL": ["{v}으로 영수증 부탁해요.", "회신 주소 {v}"],
    "ACCOUNT": ["{v}으로 환불 부탁드립니다.", "입금 계좌가 {v}인데 확인 부탁드려요."],
    "BRN": ["법인 사업자번호는 {v}이에요."],
    "ADDRESS": ["배송지를 {v}으로 바꿔 주세요.", "현재 주소: {v}"],
}
KO_QUESTIONS = [
    "비밀번호를 재설정하려면 어떻게 해야 하나요?",
    "환불은 언제 처리되나요?",
    "연말정산 영수증은 어디서 받나요?",
    "배송 조회가 안 됩니다.",
]

EN_DEV: dict[str, list[str]] = {
    "PERSON": [
        "hi its {lower} again, my order is late",
        "thanks, {lower}",
        "hello this is {lower} from accounts",
        "Cheers, {first}",
    ],
    "NINO": ["My NI number is {v}.", "national insurance no {v}"],
    "PHONE": ["call me back on {v}", "My number is {v}."],
}
EN_HELDOUT: dict[str, list[str]] = {
    "PERSON": [
        "hey its {lower} again, still no refund",
        "regards {lower}",
        "im {lower} and i cant log in",
        "Thanks so much! {first}",
        "- {lower}",
    ],
    "NINO": ["NINO: {v}", "for payroll my national insurance number is {v}"],
    "PHONE": ["ring {v} after 6", "tel {v}"],
}


def _digits(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789") for _ in range(n))


def _rrn(fake, rng: random.Random) -> str:
    value = str(fake.ssn())
    if rng.random() < 0.3:  # the masked forms people type
        return value[:8] + "******" if rng.random() < 0.5 else value[:6] + "-*******"
    if rng.random() < 0.2:
        return value.replace("-", "")
    return value


def _ko_phone(fake, rng: random.Random) -> str:
    r = rng.random()
    if r < 0.3:
        return f"010-{_digits(rng, 4)}-{_digits(rng, 4)}"
    if r < 0.4:
        return f"010{_digits(rng, 8)}"
    if r < 0.5:
        return f"+82 10-{_digits(rng, 4)}-{_digits(rng, 4)}"
    if r < 0.7:
        return rng.choice(
            [f"02-{_digits(rng, 3)}-{_digits(rng, 4)}", f"02-{_digits(rng, 4)}-{_digits(rng, 4)}"]
        )
    return str(fake.phone_number())


def _ko_account(rng: random.Random) -> str:
    shape = rng.choice([(3, 3, 6), (6, 2, 6), (4, 3, 6), (3, 4, 4, 2), (3, 6, 5)])
    if rng.random() < 0.2:
        return _digits(rng, rng.choice([12, 13, 14]))
    return "-".join(_digits(rng, n) for n in shape)


def _brn(rng: random.Random) -> str:
    body = [rng.randint(0, 9) for _ in range(9)]
    weights = (1, 3, 7, 1, 3, 7, 1, 3, 5)
    total = sum(d * w for d, w in zip(body, weights, strict=True)) + body[8] * 5 // 10
    check = (10 - total % 10) % 10
    s = "".join(map(str, body)) + str(check)
    return f"{s[:3]}-{s[3:5]}-{s[5:]}"


def _ko_address(fake, rng: random.Random) -> str:
    r = rng.random()
    if r < 0.5:
        return str(fake.address())
    if r < 0.8:
        return f"{fake.city()} {fake.borough()} {fake.road_address()}".replace("  ", " ")
    return str(fake.road_address())


def _card(fake, rng: random.Random) -> str:
    number = str(fake.credit_card_number())
    if len(number) == 16 and rng.random() < 0.5:
        return "-".join(number[i : i + 4] for i in range(0, 16, 4))
    return number


def _ko_value(kind: str, fake, rng: random.Random) -> str:
    if kind == "PERSON":
        return str(fake.name())
    if kind == "RRN":
        return _rrn(fake, rng)
    if kind == "PHONE":
        return _ko_phone(fake, rng)
    if kind == "CARD":
        return _card(fake, rng)
    if kind == "EMAIL":
        return str(fake.email())
    if kind == "ACCOUNT":
        return _ko_account(rng)
    if kind == "BRN":
        return _brn(rng)
    if kind == "ADDRESS":
        return _ko_address(fake, rng)
    raise ValueError(kind)


def korean(n: int, *, seed: int = 0, family: Family = "dev") -> list[LabelledText]:
    """``n`` Korean tickets, each a question with one to three leaks around it."""
    from faker import Faker

    rng = random.Random(seed)
    fake = Faker("ko_KR")
    fake.seed_instance(seed)
    templates = KO_DEV if family == "dev" else KO_HELDOUT
    out = []
    for _ in range(n):
        parts, labels = [], []
        for kind in rng.sample(list(templates), rng.randint(1, 3)):
            value = _ko_value(kind, fake, rng)
            parts.append(rng.choice(templates[kind]).format(v=value))
            labels.append((kind, value))
        parts.insert(rng.randint(0, len(parts)), rng.choice(KO_QUESTIONS))
        out.append(LabelledText(" ".join(parts), tuple(labels)))
    return out


def _nino(rng: random.Random) -> str:
    first = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    second = rng.choice("ABCEGHJKLMNPRSTWXYZ")
    body = _digits(rng, 6)
    value = f"{first}{second}{body}{rng.choice('ABCD')}"
    if rng.random() < 0.3:
        return f"{value[:2]} {value[2:4]} {value[4:6]} {value[6:8]} {value[8]}"
    return value


def _odd_phone(rng: random.Random) -> str:
    area = rng.choice(["012", "123", "099", "155", "111"])  # area codes NANP rejects
    return rng.choice(
        [
            f"({area}) {_digits(rng, 3)}-{_digits(rng, 4)}",
            f"({area}){_digits(rng, 3)}-{_digits(rng, 4)}",
            f"{area}-{_digits(rng, 3)}-{_digits(rng, 4)}",
        ]
    )


def english_gaps(n: int, *, seed: int = 0, family: Family = "dev") -> list[LabelledText]:
    """``n`` English tickets leaking a lower-case or single name, a NINO or an odd phone."""
    from faker import Faker

    rng = random.Random(seed)
    fakers = [Faker("en_US"), Faker("en_GB")]
    for i, f in enumerate(fakers):
        f.seed_instance(seed * 10 + i)
    templates = EN_DEV if family == "dev" else EN_HELDOUT
    out = []
    for _ in range(n):
        fake = rng.choice(fakers)
        kind = rng.choice(list(templates))
        template = rng.choice(templates[kind])
        if kind == "PERSON":
            first, last = str(fake.first_name()), str(fake.last_name())
            value = first if "{first}" in template else f"{first} {last}".lower()
            text = template.format(lower=value, first=value)
        else:
            if kind == "NINO":
                value = str(fakers[1].ssn()) if rng.random() < 0.5 else _nino(rng)
            else:
                value = _odd_phone(rng)
            text = template.format(v=value)
        out.append(LabelledText(text, ((kind, value),)))
    return out


# ordinary Korean words and phrases a recogniser must leave alone
KO_ORDINARY = [
    "안녕하세요",
    "연말정산",
    "감사합니다",
    "비밀번호",
    "고객센터",
    "환불",
    "배송",
    "회원가입",
    "주문번호",
    "결제",
    "영수증",
    "문의드립니다",
]


def ko_value_gone(kind: str, value: str, text: str) -> bool:
    """Whether a planted Korean value is gone: a name's given name too (``김<PERSON>`` is not
    removed), an RRN's birth date (masked forms), an address's road and number."""
    if kind == "PERSON":
        return value not in text and (len(value) < 3 or value[1:] not in text)
    if kind == "RRN":
        return value[:6] not in text
    if kind == "ADDRESS":
        parts = value.split()
        road = next((p for p in parts if p.endswith(("로", "길", "가"))), None)
        number = parts[parts.index(road) + 1] if road and parts.index(road) + 1 < len(parts) else ""
        return road is None or f"{road} {number}" not in text and road not in text
    return value not in text


def en_value_gone(kind: str, value: str, text: str) -> bool:
    """Whether a planted English value is gone (a name: none of its words, any case)."""
    import re

    if kind == "PERSON":
        return not any(
            re.search(rf"(?<!\w){re.escape(p)}(?!\w)", text, re.IGNORECASE) for p in value.split()
        )
    return value not in text
