"""Korean person names: kiwipiepy's proper nouns corroborated by what surrounds them (a
particle or title after, an introduction or form label before, a common given-name shape),
given names alone (``지수야``, ``민준이가``), names spelled with spaces (``김 민 수``) and
romanised names inside Korean text (``HONG GILDONG``, ``Gil-dong Hong``, ``park jisoo``).

A proper noun is not a name on its own: kiwi tags unknown common words as NNP too (``배송지``,
``이체``, ``태블릿``), and a surname syllable starts thousands of ordinary words (``고객``,
``이체``), so every kiwi hit needs a cue or a given-name-shaped body.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import regex as re

SURNAMES = (
    "남궁|황보|제갈|선우|독고|사공|서문|"
    "김|이|박|최|정|강|조|윤|장|임|한|오|서|신|권|황|안|송|전|홍|유|고|문|양|손|배|백|허|남|"
    "심|노|하|곽|성|차|주|우|구|민|류|나|진|지|엄|채|원|천|방|공|현|함|변|염|여|추|도|소|석|"
    "선|설|마|길|연|위|표|명|기|반|라|왕|금|옥|육|인|맹|제|모|탁|국|어|은|편|용|예|경|봉|사|부|"
    "가|복|태|목|형|피|두|감|음|빈|동|온|호|범|좌|팽|승|간|상|갈|단|견|당|리|로|임"
)
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
    "오산 하남 유성 유성구 중국 미국 영국 호주 태국 인도 독일 대만 홍콩 일본 한국".split()
)
_H = r"\p{Hangul}"
_WORD = re.compile(r"[가-힣]+")
_ROAD_AHEAD = re.compile(r"\s?\d")
_TITLES = (
    r"씨|님|여사|선생|교수|고객|회원|원장|대표|팀장|과장|부장|차장|대리|사원|실장|기사|박사|"
    r"께서|께|명의|앞으로|드림|올림|배상"
)
_KIN = (
    r"엄마|아빠|어머니|아버지|어머님|아버님|언니|오빠|누나|형|동생|삼촌|이모|고모|할머니|할아버지|"
    r"친구|선배|후배|남편|아내|와이프|아들|딸|부모님|맘|네"
)
# the word after a name: a title, 께서/명의/앞으로, a sign-off or a relative ("진아 엄마")
_NEXT_CUE = re.compile(
    rf"\s?(?:{_TITLES}|{_KIN}|이라고|라고|입니다|이에요|예요|인데|이고|이세요|맞)(?!대|말|태|기|앗|식|들|요|두|방|쪽|편)"
)
# endings glued to a name; the first group says "a person" on its own, the second is any noun's
_NAME_ENDINGS = (
    "입니다|입니당|이에요|이예요|예요|이고요|이구요|이고|이라고|라고|이라는|라는|인데요|인데|이세요|"
    "이셨어요|이랑|이한테|이에게|이가|이는|이도|이를|이의|이와|이야|이네|씨|님|께서|께|야|아|구요"
).split("|") + [
    t + p
    for t in ("님", "씨")
    for p in "께 께서 이 은 의 을 에게 한테 도 과 가 는 를 랑 와".split()
]
_FAMILIAR = ("이가", "이는", "이를", "이도", "이의", "이와", "이한테", "이에게")
_ANY_ENDINGS = "이|가|는|은|을|를|도|의|랑|한테|에게|와|과|한테서|하고|도요|요|로|으로".split("|")
_ENDINGS = sorted({*_NAME_ENDINGS, *_ANY_ENDINGS}, key=len, reverse=True)
_PLACE_END = ("시", "도", "구", "군", "동", "읍", "면", "리", "로", "길", "역", "정", "점", "관")
_BEFORE_CUE = re.compile(
    r"(?:저는|전|나는|난|나|저|제\s?이름은|이름은?|이름이|성함은?|성함이|성명|고객명|예금주|수신인|"
    r"수령인|수취인|받는\s?분|보내는\s?분|받는\s?사람|보낸\s?사람|보내는\s?사람|신청인|보호자|"
    r"환자명?|담당자|상담원|명의자|대표자|작성자|가입자|피보험자|계약자|소유자|주문자|발신인|위임인|"
    r"수임인|입금자명?|예약자명?|탑승객|From|To|Cc|name)\s*[:：]?\s*[\"']?$"
)
_LABELLED = re.compile(
    rf"(?:성명|이름|성함|고객명|예금주|수령인|수취인|받는\s?분|보내는\s?분|신청인|보호자|환자명|"
    rf"담당자|명의자|대표자|작성자|가입자|피보험자|계약자|주문자|수신인|발신인)(?:\s?명)?"
    rf"(?:\([^)]{{0,10}}\))?[\"']?\s*[:：]\s*[\"']?"
    rf"([{_H}](?: ?[{_H}]){{1,3}})(?![{_H}])"
)
# a relative or title, then the name in brackets: "할아버지(최불암)께서"
_BRACKETED = re.compile(rf"(?:{_KIN}|{_TITLES}|본인|고객)\s?[(（]([{_H}]{{2,4}})[)）]")
_SPACED = re.compile(rf"(?<![{_H}])(?:{SURNAMES})\s[{_H}](?:\s?[{_H}])(?![{_H}])")
# "장 혁이에요": a one-syllable given name, only with the copula or a title glued to it
_SPACED_ONE = re.compile(
    rf"(?<![{_H}])(?:{SURNAMES})\s[{_H}](?=이에요|입니다|이고|이라고|이구요|씨|님|\s(?:씨|님))"
)
# a JSON or form field whose key says "name" and whose value is Hangul
_JSON_NAME = re.compile(
    r"[\"'](?i:[a-z_]*name[a-z_]*|이름|성명|성함|고객명|holder|owner|customer|user|patient|sender|"
    r"recipient|receiver|예금주|소유자|수령인|신청인|보호자|환자명)[\"']\s*:\s*[\"']"
    rf"([{_H}]{{2,5}}(?: [{_H}]{{1,4}})?)[\"']"
)
# a Latin-script name after a Korean label or self-introduction ("성명 Nguyen Van An",
# "저 Jenny 인데요"): foreigners and English names inside Korean text
_LATIN_LABELLED = re.compile(
    r"(?:성명|이름|성함|고객명|예금주|수령인|수취인|신청인|보호자|환자명|담당자|예약자명?)"
    r"(?:\([^)]{0,10}\))?\s*[:：]?\s*(\p{Lu}\p{Ll}+(?:[ -]\p{Lu}\p{Ll}+){0,3})(?![\p{L}])"
)
_LATIN_INTRO = re.compile(
    r"(?:저는?|나는?|제\s?이름은|이름은)\s+(\p{Lu}\p{Ll}{1,15}(?:\s\p{Lu}\p{Ll}{1,15})?)"
    r"(?=\s?(?:인데|입니다|이에요|예요|이고|라고|이라고|이구요))"
)
_ROMAN_SURNAMES = (
    "Kim|Gim|Lee|Yi|Rhee|Park|Pak|Bak|Choi|Choe|Jung|Jeong|Chung|Cheong|Kang|Gang|Cho|Jo|Yoon|"
    "Yun|Jang|Chang|Lim|Im|Rim|Han|Oh|Seo|Suh|Shin|Sin|Kwon|Gwon|Hwang|Ahn|An|Song|Jeon|Jun|"
    "Chun|Hong|Yoo|Yu|Ryu|Ryoo|Ko|Koh|Go|Moon|Mun|Yang|Son|Sohn|Bae|Baek|Paik|Baik|Heo|Hur|"
    "Huh|Nam|Sim|Shim|Noh|Roh|Ha|Kwak|Gwak|Sung|Seong|Cha|Joo|Ju|Chu|Woo|Koo|Ku|Gu|Min|Na|Ra|"
    "Jin|Ji|Eom|Um|Uhm|Chae|Won|Cheon|Bang|Gong|Hyun|Hyeon|Ham|Byun|Byeon|Yeom|Choo|Do|Seok|"
    "Suk|Seon|Ma|Gil|Yeon|Pyo|Myung|Ki|Ban|Wang|Geum|Yuk|Maeng|Tak|Eun|Yong|Kyung|Bong|Tae|"
    "Namgung|Hwangbo|Jegal|Sunwoo|Dokgo|Sagong"
)
_SYL = (
    r"(?:kk|tt|pp|ss|jj|ch|sh|[bcdghjklmnprstwy])?"
    r"(?:yeo|yae|wae|eo|ae|ya|ye|yo|yu|wa|wo|we|wi|oe|eu|ui|oo|ee|ou|a|e|i|o|u)"
    r"(?:ng|n|l|k|m|p|t|b)?"
)
_GIVEN_ROMAN = rf"{_SYL}(?:[- ]?{_SYL})?"
_ROMAN = re.compile(
    rf"(?<![A-Za-z])(?:(?P<s1>{_ROMAN_SURNAMES})(?:,?\s+|/)(?P<g1>{_GIVEN_ROMAN})"
    rf"|(?P<g2>{_GIVEN_ROMAN})\s+(?P<s2>{_ROMAN_SURNAMES}))(?![A-Za-z])",
    re.IGNORECASE,
)
_NOT_GIVEN = {
    "seoul", "busan", "incheon", "daegu", "daejeon", "gwangju", "ulsan", "sejong", "jeju",
    "suwon", "gangnam", "hongdae", "itaewon", "jongno", "pangyo", "bundang", "ilsan", "songdo",
    "gimpo", "kong", "korea", "the", "you", "and", "one", "to", "on", "in", "so", "no", "go",
    "me", "we", "he", "she", "bye", "yes", "up", "man", "mall", "bank", "tea", "ok", "hi",
    "la", "pay", "pro", "max", "mini", "plus", "home", "team", "map", "pop", "top",
}  # fmt: skip


def _given_shaped(word: str) -> bool:
    return len(word) >= 2 and all(c in GIVEN for c in word[-2:])


def _cued(text: str, start: int, end: int) -> bool:
    return bool(_NEXT_CUE.match(text, end) or _BEFORE_CUE.search(text[max(0, start - 16) : start]))


def _common_word(tokens: list[Any], start: int, end: int) -> bool:
    """kiwi knows the stretch as an ordinary word (one non-proper-noun token spanning it)."""
    return any(
        t.start <= start and t.start + t.len >= end and t.tag not in ("NNP", "XSN", "SW")
        for t in tokens
    )


def _proper(tokens: list[Any], start: int) -> bool:
    return any(t.start == start and t.tag == "NNP" for t in tokens)


@lru_cache(maxsize=4096)
def _stems(word: str) -> tuple[tuple[str, str], ...]:
    """The name-shaped ``(stem, ending)`` readings of a Hangul word: the word itself and the
    word without each ending it carries, longest ending first."""
    out = [(word, "")]
    for ending in _ENDINGS:
        if word.endswith(ending) and 2 <= len(word) - len(ending) <= 4:
            out.append((word[: -len(ending)], ending))
    return tuple(
        (stem, ending)
        for stem, ending in out
        if stem not in STOP and (_full_name_shape(stem) or (len(stem) == 2 and _given_shaped(stem)))
    )


def _full_name_shape(stem: str) -> bool:
    if len(stem) == 4:
        return stem[:2] in SURNAMES.split("|") and _given_shaped(stem[2:])
    return len(stem) == 3 and stem[0] in SURNAMES and _given_shaped(stem[1:])


def _word_name(text: str, tokens: list[Any], start: int, word: str) -> int:
    """How many leading characters of the Hangul ``word`` at ``start`` are a name (0: none)."""
    for stem, ending in _stems(word):
        end = start + len(stem)
        strong = ending in _NAME_ENDINGS or _cued(text, start, end + len(ending))
        known = _common_word(tokens, start, end) and not _familiar(stem, ending)
        plain = _proper(tokens, start) and not known and not stem.endswith(_PLACE_END)
        if len(stem) >= 3 and (strong or plain):
            return len(stem)
        if len(stem) == 2 and not known and stem[0] != stem[1]:
            proper = _proper(tokens, start)
            if strong or (proper and ending and _given_vocative(tokens, end)):
                return 2
    return 0


def _familiar(stem: str, ending: str) -> bool:
    """``정국이가``: the familiar -이 between a consonant-final given name and its particle,
    which no common noun takes (``사람이가`` is not Korean), even one kiwi knows as a word."""
    return ending in _FAMILIAR and (ord(stem[-1]) - 0xAC00) % 28 != 0


def _given_vocative(tokens: list[Any], end: int) -> bool:
    """A given name alone is corroborated by the particle kiwi read after it."""
    return any(
        t.start == end and (t.tag.startswith("J") or (t.tag == "XSN" and t.form == "이"))
        for t in tokens
    )


def _kiwi_spans(text: str, tokenize: Callable[[str], list[Any]]) -> list[tuple[int, int]]:
    """Names among the Hangul words; kiwi runs only on texts with a name-shaped word."""
    words = [
        (m.start(), m.group(0))
        for m in _WORD.finditer(text)
        if _stems(m.group(0))
        and not (_ROAD_AHEAD.match(text, m.end()) and m.group(0).endswith(("로", "길")))
    ]  # "공항대로 247" is a street, not a name before 로
    if not words:
        return []
    tokens = tokenize(text)
    starts = [t.start for t in tokens]
    spans = []
    for start, word in words:
        near = tokens[bisect_left(starts, start) : bisect_right(starts, start + len(word))]
        n = _word_name(text, near, start, word)
        if n:
            spans.append((start, start + n))
    return spans


def _regex_spans(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _LABELLED.finditer(text):
        value = m.group(1)
        cut = len(value)
        if len(value.replace(" ", "")) == 4 and value[-1] in "님씨은는이가을를도":
            cut = len(value) - 1  # "김민수님": the title is not part of the name
        spans.append((m.start(1), m.start(1) + cut))
    for m in _SPACED.finditer(text):
        given = m.group(0).split(" ", 1)[1].replace(" ", "")
        before = _BEFORE_CUE.search(text[max(0, m.start() - 16) : m.start()])
        if _NEXT_CUE.match(text, m.end()) or (before and _given_shaped(given)):
            spans.append((m.start(), m.end()))
    spans += [m.span() for m in _SPACED_ONE.finditer(text)]
    spans += [m.span(1) for m in _JSON_NAME.finditer(text)]
    spans += [
        m.span(1)
        for m in _BRACKETED.finditer(text)
        if m.group(1)[0] in SURNAMES or _given_shaped(m.group(1))
    ]
    spans += [m.span(1) for m in _LATIN_LABELLED.finditer(text)]
    spans += [m.span(1) for m in _LATIN_INTRO.finditer(text)]
    for m in _ROMAN.finditer(text):
        spans.extend(_roman_span(m))
    return spans


def _roman_span(m: Any) -> list[tuple[int, int]]:
    given = (m.group("g1") or m.group("g2")).lower()
    if given.replace("-", "").replace(" ", "") in _NOT_GIVEN or given.split(" ")[0] in _NOT_GIVEN:
        return []
    value = m.group(0)
    letters = [c for c in value if c.isalpha()]
    words = re.split(r"[\s,/]+", value)
    upper = all(c.isupper() for c in letters)
    lower = all(c.islower() for c in letters)
    title = all(w[:1].isupper() for w in words if w)
    short = len(m.group("s1") or m.group("s2")) < 3
    if upper or title or (lower and not short):
        return [(m.start(), m.end())]
    return []


def korean_name_spans(text: str, tokenize: Callable[[str], list[Any]]) -> list[tuple[int, int]]:
    """Spans of Korean names in ``text`` (``tokenize`` is kiwipiepy's ``Kiwi.tokenize``)."""
    spans = sorted(set(_kiwi_spans(text, tokenize) + _regex_spans(text)))
    return [
        (s, e) for s, e in spans if not any(o != (s, e) and o[0] <= s and e <= o[1] for o in spans)
    ]  # a span inside a longer one ("Gil" of "Gil-dong Hong") is the same name
