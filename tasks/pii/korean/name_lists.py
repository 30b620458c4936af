"""The word lists Korean name detection leans on: surnames, the syllables given names are made
of, Faker's ``ko_KR`` person and address lists (a runtime dependency already: 121 given
names, 44 surnames, the cities, Seoul's districts, provinces and countries) and the words that
look like names but are not people.

Faker's lists are a shape signal, never proof on their own: ``지원`` (support), ``지연``
(delay), ``현지`` (local) and ``보람`` (reward) are given names in it and ordinary words in
every support chat, so a list hit still needs what surrounds it (see
:mod:`tasks.pii.korean.names`).
"""

from __future__ import annotations

from functools import lru_cache

SURNAMES = (
    "남궁|황보|제갈|선우|독고|사공|서문|"
    "김|이|박|최|정|강|조|윤|장|임|한|오|서|신|권|황|안|송|전|홍|유|고|문|양|손|배|백|허|남|"
    "심|노|하|곽|성|차|주|우|구|민|류|나|진|지|엄|채|원|천|방|공|현|함|변|염|여|추|도|소|석|"
    "선|설|마|길|연|위|표|명|기|반|라|왕|금|옥|육|인|맹|제|모|탁|국|어|은|편|용|예|경|봉|사|부|"
    "가|복|태|목|형|피|두|감|음|빈|동|온|호|범|좌|팽|승|간|상|갈|단|견|당|리|로|임"
)
COMPOUND_SURNAMES = frozenset(s for s in SURNAMES.split("|") if len(s) == 2)
# syllables that make up most Korean given names; a surname + two of these is name-shaped
GIVEN = set(
    "민서지현수준우영정연은진하윤예원성호재유주희아혜경동상석훈철미숙순자명혁빈나다채소시태용"
    "승규선형기남옥란애화인일한건환찬율린솔람결온도범종욱웅택식근길봉춘덕복분례임향금령의보"
    "국광창효완청열균섭엽표필학해홍후휘겸곤구랑려륜리림별봄빛산새샘설세슬신안양오요운월위융"
    "을익중치탁평항협황흠강교권늘바담대돈두래량렬록루룡름만매면모무문미배백벽병삼송실심여옥라가"
    "말순검니엘"
)
# words kiwi tags as proper nouns or that look like a name but are not people
STOP = set(
    "배송지 주소지 거주지 소재지 목적지 출발지 도착지 경유지 상하이 하와이 하노이 시드니 마닐라 "
    "이체 고객 상담원 이용자 신청자 구매자 주문자 방문자 문의자 수령자 사용자 소비자 운전자 가입자 "
    "예약자 당첨자 연구원 공무원 설계사 배달원 조합원 강사 기사 선배 후배 동기 이번주 이번달 "
    "우리 저희 여기 거기 저기 오늘 내일 어제 지금 요즘 진짜 정말 나중 원래 모두 다시 "
    "배민 쿠팡 신세계 현대 삼성 한화 롯데 신한 국민 하나 우리 농협 기업 카카오 토스 "
    "서울 부산 대구 인천 광주 대전 울산 세종 경기 강원 제주 강남 강북 서초 송파 마포 성수 "
    "신촌 홍대 명동 이태원 한남 종로 전주 진주 경주 공주 남원 안산 안양 구미 김해 김포 양산 "
    "오산 하남 유성 유성구 중국 미국 영국 호주 태국 인도 독일 대만 홍콩 일본 한국 "
    "판교 해운대 광안리 여의도 잠실 분당 일산 송도 동탄 광교".split()
)
# the ones a person is called by, not a person: "기사 님", "사장 님"
ROLE_WORDS = frozenset(
    "고객 회원 기사 사장 선생 작가 교수 원장 대표 팀장 과장 부장 차장 대리 사원 실장 주임 "
    "매니저 상담사 담당 담당자 관리자 판매자 구매자 운영자 작성자 간호사 변호사 의사 약사 "
    "부모 학부모 어머 아버 할머 할아버 형 누나 언니 오빠 친구 선배 후배 신부 목사 스님 "
    # what people call each other ("여보야", "자기야", "얘들아"): a vocative, not a name
    "여보 자기 당신 아가 얘들 애들 형님 누님 동생 아들 엄마 아빠 이모 삼촌 고모 동기 자네 녀석 "
    "여러분 손님 사장 아저 아줌 아주머 총각 아가씨 학생 어르신".split()
)


@lru_cache(maxsize=1)
def faker_given_names() -> frozenset[str]:
    """Faker's ``ko_KR`` given names (male, female and both), Hangul."""
    from faker.providers.person.ko_KR import Provider

    names: set[str] = set()
    for attr in ("first_names", "first_names_male", "first_names_female"):
        names.update(getattr(Provider, attr, ()) or ())
    return frozenset(n for n in names if 2 <= len(n) <= 3)


@lru_cache(maxsize=1)
def place_words() -> frozenset[str]:
    """Places a name-shaped word may really be: Faker's ``ko_KR`` cities, districts,
    metropolitan cities, provinces and countries (with and without their 시/구/도 suffix)
    plus :data:`STOP`."""
    from faker.providers.address.ko_KR import Provider

    words: set[str] = set(STOP)
    for attr in ("cities", "boroughs", "metropolitan_cities", "provinces", "countries"):
        for place in getattr(Provider, attr, ()) or ():
            for part in place.split():
                words.add(part)
                for suffix in (
                    "특별자치시",
                    "특별자치도",
                    "특별시",
                    "광역시",
                    "시",
                    "구",
                    "군",
                    "도",
                ):
                    if part.endswith(suffix) and len(part) - len(suffix) >= 2:
                        words.add(part[: -len(suffix)])
    return frozenset(words)


def surname_split(stem: str) -> tuple[str, str] | None:
    """``(surname, given)`` of a Hangul full name, or ``None`` when it does not start with a
    surname (compound surnames first: ``남궁민`` is 남궁 + 민)."""
    if len(stem) >= 3 and stem[:2] in COMPOUND_SURNAMES:
        return stem[:2], stem[2:]
    if 3 <= len(stem) <= 4 and stem[0] in SURNAMES.split("|"):
        return stem[0], stem[1:]
    return None
