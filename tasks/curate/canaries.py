"""Canary records: synthetic people and identifiers planted in every curate batch, so each run
measures whether the anonymiser still removes what it must (DESIGN "Metrics":
``flywheel_pii_canary_recall{language,entity_type}``).

Each run draws its people fresh with Faker from a random seed (never a fixed list; the seed is
audited so a failing run can be reproduced with ``FLYWHEEL_CURATE__CANARY_SEED``) and writes
them, per configured language, in the shapes personal data reaches the platform in: free text
a user types, JSON tool results (nested objects included), CSV rows under a header and
``key=value`` lines of a CRM call. A canary is an ordinary rollout row (its own trace id, a
user turn, a tool call, a tool result, an answer), anonymised with the real rows in the same
chunks; :mod:`tasks.curate.canary_check` then checks it and takes it out of the batch.

Only Faker's own person and identifier providers are used for values; the templates around
them are ours. A value whose word also occurs in its record's template (``Young`` in "young
children") is drawn again, so a surviving word always means a surviving value.
"""

from __future__ import annotations

import csv
import io
import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, cast

import regex as re

from infra.traces.conversation import DEFAULT_WORKLOAD, Messages, ToolCall
from tasks.pii.generic.references import TOLL_FREE_AREAS
from tasks.pii.names import NAME_PARTICLES

if TYPE_CHECKING:
    from infra.settings import CurateSettings
    from tasks.curate.rows import Candidate

SHAPES = ("text", "json", "csv", "kv")
# Latin-script locales of the English canaries' names (diacritics, hyphens and apostrophes
# come with them); values other than names are en_US's
EN_NAME_LOCALES = ("en_US", "en_GB", "en_IE", "fr_FR", "de_DE", "es_ES")
CANARY_MODEL = "canary"


@dataclass(frozen=True)
class CanaryValue:
    """One planted value: its language, its type (``pii-eval``'s label vocabulary) and the
    value; ``parts`` are the words of a name that must not survive alone either."""

    language: str
    entity_type: str
    value: str
    parts: tuple[str, ...] = ()


@dataclass(frozen=True)
class Canary:
    """One planted record: the rollout row that goes through anonymisation and its values."""

    row: dict[str, Any]
    values: tuple[CanaryValue, ...]

    @property
    def trace_id(self) -> str:
        """The row's trace id (a fresh UUID: never a real trace's)."""
        return str(self.row["trace_id"])


@dataclass(frozen=True)
class Person:
    """One synthetic person: field name -> (entity type, value) and the name's words."""

    fields: dict[str, tuple[str, str]]
    name_parts: tuple[str, ...]


def run_seed(configured: int | None) -> int:
    """The run's canary seed: the configured one (to reproduce a run), else a fresh one."""
    return configured if configured is not None else random.SystemRandom().randrange(2**63)


class _Fakers:
    """One Faker per locale for one run's planting (building one costs more than a record),
    reseeded for each person."""

    def __init__(self) -> None:
        self._by_locale: dict[str, Any] = {}

    def __call__(self, locale: str, seed: int) -> Any:
        from faker import Faker

        fake = self._by_locale.get(locale)
        if fake is None:
            fake = self._by_locale[locale] = Faker(locale)
        fake.seed_instance(seed)
        return fake


def _dob(fake: Any, style: int) -> str:
    born: date = fake.date_of_birth(minimum_age=18, maximum_age=90)
    return born.strftime(("%Y-%m-%d", "%d.%m.%Y", "%m/%d/%Y")[style % 3])


def _real_shaped(name: str) -> bool:
    """Whether a Faker name is shaped as people's are: every lower-case word a particle
    (``van der``, ``de``); Faker's ``de_DE`` list has entries like ``auch Schlauchin``."""
    return all(w in NAME_PARTICLES for w in name.split() if w[:1].islower())


def _english_person(rng: random.Random, seed: int, fakers: _Fakers) -> Person:
    names = fakers(rng.choice(EN_NAME_LOCALES), seed)
    first, last = names.first_name(), names.last_name()
    while not _real_shaped(f"{first} {last}"):
        first, last = names.first_name(), names.last_name()
    fake = fakers("en_US", seed)
    area = f"{rng.randint(2, 9)}{rng.randint(0, 8)}{rng.randint(0, 9)}"
    while area in TOLL_FREE_AREAS:  # a business's line, not a person's
        area = f"{rng.randint(2, 9)}{rng.randint(0, 8)}{rng.randint(0, 9)}"
    exchange, line = f"{rng.randint(2, 9)}{rng.randint(10, 99)}", f"{rng.randint(0, 9999):04d}"
    phone = rng.choice(
        [f"({area}) {exchange}-{line}", f"{area}-{exchange}-{line}", f"+1 {area} {exchange} {line}"]
    )
    card = fake.credit_card_number(card_type=rng.choice(["visa16", "mastercard"]))
    if rng.random() < 0.5:
        card = " ".join(card[i : i + 4] for i in range(0, len(card), 4))
    fields = {
        "name": ("PERSON", f"{first} {last}"),
        "email": ("EMAIL_ADDRESS", fake.email()),
        "phone": ("PHONE_NUMBER", phone),
        "ssn": ("US_SSN", fake.ssn()),
        "card": ("CREDIT_CARD", card),
        "dob": ("DATE_OF_BIRTH", _dob(fake, rng.randrange(3))),
        "iban": ("BANK_ACCOUNT", fake.iban()),
    }
    return Person(fields=fields, name_parts=(first, last))


def _korean_person(rng: random.Random, seed: int, fakers: _Fakers) -> Person:
    fake = fakers("ko_KR", seed)
    last, first = fake.last_name(), fake.first_name()
    fields = {
        "name": ("PERSON", f"{last}{first}"),
        "email": ("EMAIL_ADDRESS", fake.free_email()),
        "phone": ("PHONE_NUMBER", f"010-{rng.randint(2000, 9999)}-{rng.randint(0, 9999):04d}"),
        "rrn": ("KR_RRN", fake.ssn()),
        "plate": ("KR_CAR_PLATE", fake.license_plate()),
        "dob": ("DATE_OF_BIRTH", _dob(fake, 0)),
    }
    # a one-syllable surname is no word to look for on its own; the given name is
    return Person(fields=fields, name_parts=(first,))


# ------------------------------------------------------------------------ the shapes

# free text in the cue classes the anonymiser promises (a greeting, "name on the account",
# a sign-off, a role word); each template once per four records of a language
EN_TEXT = (
    "Hi, this is {name}. My card {card} was charged twice; call me on {phone}.",
    "Please update my profile. Name on the account: {name}, date of birth {dob}, SSN {ssn}.",
    "Please refund to IBAN {iban} and write to {email} when it is done.\n— {name}",
    "Can you check the order for the customer {name}? Reach them at {phone} or {email}.",
)
KO_TEXT = (
    "안녕하세요, 저는 {name}입니다. 연락처는 {phone}이고 이메일은 {email}입니다.",
    "고객명: {name}\n주민등록번호: {rrn}\n차량번호: {plate}",
    "{name} 고객님의 생년월일은 {dob}이며 전화번호는 {phone}입니다.",
    "{name}님, 주문하신 상품이 발송되었습니다. 문의는 {email}로 보내 주세요.",
)
TEXT_TEMPLATES = {"en": EN_TEXT, "ko": KO_TEXT}
USER_ASKS = {
    "en": "Look up the customer record and fix the shipping details.",
    "ko": "고객 정보를 조회해서 배송 정보를 수정해 주세요.",
}
# no value in the answer: a name there has no cue, which the canary does not test
ANSWERS = {"en": "Done: the record is updated.", "ko": "고객님의 정보를 수정했습니다."}
# the fields each structured shape carries, per language (JSON keys as agents' tools name them)
STRUCTURED = {
    "en": ("name", "email", "phone", "dob", "ssn"),
    "ko": ("name", "email", "phone", "rrn"),
}
JSON_KEYS = {"name": "fullName", "email": "email", "phone": "phone", "dob": "birthDate"}
JSON_KEYS |= {"ssn": "ssn", "rrn": "rrn"}
KV_KEYS = {"name": "customer_name", "email": "email", "phone": "phone", "dob": "dob"}
KV_KEYS |= {"ssn": "ssn", "rrn": "resident_registration_no"}


def _json_result(person: Person, keys: tuple[str, ...], rng: random.Random) -> str:
    record = {JSON_KEYS[k]: person.fields[k][1] for k in keys}
    order = {"order_id": f"ORD-{rng.randint(100000, 999999)}", "status": "shipped"}
    if rng.random() < 0.5:  # nested, as customer records often are
        return json.dumps({**order, "customer": record}, ensure_ascii=False)
    ship_to = {"name": record.pop(JSON_KEYS["name"])}
    return json.dumps({"ship_to": ship_to, **record, **order}, ensure_ascii=False)


def _csv_result(person: Person, keys: tuple[str, ...], rng: random.Random) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["order_id", *keys, "status"])
    writer.writerow([f"{rng.randint(100000, 999999)}", *(person.fields[k][1] for k in keys), "ok"])
    return out.getvalue()


def _kv_result(person: Person, keys: tuple[str, ...], rng: random.Random) -> str:
    lines = [f"ticket=T{rng.randint(10000, 99999)}"]
    lines += [f"{KV_KEYS[k]}={person.fields[k][1]}" for k in keys]
    return "\n".join([*lines, "status=open"])


RESULTS: dict[str, Callable[[Person, tuple[str, ...], random.Random], str]] = {
    "json": _json_result,
    "csv": _csv_result,
    "kv": _kv_result,
}
_FIELD = re.compile(r"\{(\w+)\}")
_SEPARATORS = re.compile(r"[\s\-./()+]")
_HANGUL = re.compile(r"\p{Hangul}")


def _texts(language: str, index: int, person: Person, rng: random.Random) -> dict[str, str]:
    """Record ``index``'s texts (user turn with ``{field}`` slots, tool result, answer): its
    shape and free-text template taken in turn, so every run plants every type."""
    answer, shape = ANSWERS[language], SHAPES[index % len(SHAPES)]
    if shape == "text":
        templates = TEXT_TEMPLATES[language]
        template = templates[(index // len(SHAPES)) % len(templates)]
        return {"user": template, "result": "", "answer": answer}
    keys = STRUCTURED[language]
    result = RESULTS[shape](person, keys, rng)
    return {"user": USER_ASKS[language], "result": result, "answer": answer}


def _record(
    language: str, index: int, rng: random.Random, fakers: _Fakers, *, window: str, at: Any
) -> Canary:
    """Record ``index`` of ``language``: a person drawn until no word of the name occurs in
    the record's own words (so only the planted value can survive)."""
    make = _english_person if language == "en" else _korean_person
    while True:
        person = make(rng, rng.randrange(2**63), fakers)
        texts = _texts(language, index, person, rng)
        fields = {k: v for k, (_t, v) in person.fields.items()}
        user = texts["user"].format(**fields)
        used = set(_FIELD.findall(texts["user"])) | (
            set(STRUCTURED[language]) if texts["result"] else set()
        )
        planted = tuple(
            CanaryValue(language, etype, value, person.name_parts if key == "name" else ())
            for key, (etype, value) in person.fields.items()
            if key in used
        )
        rendered = [user, texts["result"], texts["answer"]]
        blanked = [_blank(t, planted) for t in rendered]
        if not any(survives(v, blanked) for v in planted):
            break
    row = _row(user, texts["result"], texts["answer"], window=window, at=at)
    return Canary(row=row, values=planted)


def _blank(text: str, values: tuple[CanaryValue, ...]) -> str:
    for v in sorted(values, key=lambda v: -len(v.value)):
        text = text.replace(v.value, " ")
    return text


def _compact(text: str) -> str:
    return _SEPARATORS.sub("", text).casefold()


def survives(value: CanaryValue, texts: list[str]) -> bool:
    """Whether ``value`` is still in ``texts``: the value compared without spaces, dashes,
    dots, slashes, parentheses and plus signs, ignoring case, or a word of it that
    identifies alone (a name's given name or surname; Korean ones with their particles)."""
    compact = _compact(value.value)
    for text in texts:
        if compact and compact in _compact(text):
            return True
        for part in value.parts:
            if _HANGUL.search(part):  # Korean names take particles: no word boundary
                if part in text:
                    return True
            elif re.search(rf"(?<!\w){re.escape(part)}(?!\w)", text, flags=re.IGNORECASE):
                return True
    return False


def _row(user: str, result: str, answer: str, *, window: str, at: Any) -> dict[str, Any]:
    """A rollout row as the gates hand it on (eligible, top reward, its own prompt group)."""
    trace_id = f"canary-{uuid.uuid4().hex}"
    messages: Messages = [{"role": "user", "content": user}]
    contexts = []
    if result:
        call: ToolCall = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "lookup_customer", "arguments": json.dumps({"ticket": "open"})}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_1", "content": result},
        ]
        contexts.append(result)
    messages.append({"role": "assistant", "content": answer})
    return {
        "trace_id": trace_id,
        "prompt_group": trace_id,
        "user_key": None,
        "workload": DEFAULT_WORKLOAD,
        "question": user,
        "answer": answer,
        "contexts": contexts,
        "messages": json.dumps(messages, ensure_ascii=False),
        "model_version": CANARY_MODEL,
        "reward": 1.0,
        "reward_config_hash": None,
        "eligible_as": "train",
        "window": window,
        "created_at": at,
    }


def plant(
    languages: list[str], *, per_language: int, seed: int, window: str, at: Any
) -> list[Canary]:
    """``per_language`` canary records per configured language that has canaries (``en``,
    ``ko``), the shapes taken in turn, drawn from ``seed``."""
    rng, fakers = random.Random(seed), _Fakers()
    out = []
    for language in languages:
        if language not in TEXT_TEMPLATES:
            continue
        for i in range(per_language):
            out.append(_record(language, i, rng, fakers, window=window, at=at))
    return out


@dataclass(frozen=True)
class CanaryBatch:
    """The canaries of one run and the seed that drew them."""

    seed: int
    canaries: list[Canary]

    def rows(self) -> list[Candidate]:
        """Copies of the canary rows, for the batch that goes to anonymisation."""
        return [cast("Candidate", dict(c.row)) for c in self.canaries]


def plant_canaries(cfg: CurateSettings, *, window: str) -> CanaryBatch:
    """The run's canaries: ``cfg.canary_records`` per configured language that has canaries,
    drawn from ``cfg.canary_seed`` or a fresh seed."""
    seed = run_seed(cfg.canary_seed)
    canaries = plant(
        list(cfg.languages),
        per_language=cfg.canary_records,
        seed=seed,
        window=window,
        at=datetime.now(UTC),
    )
    return CanaryBatch(seed=seed, canaries=canaries)
