"""A labelled corpus of texts that leak personal data, generated with Faker.

Every text carries the exact values planted in it, by kind (EMAIL, PHONE, CARD, SSN, IBAN,
PERSON, ADDRESS, ACCOUNT), so a test can check each value is gone after anonymisation.
Values come from several Faker locales and are written in several formats (cards and IBANs
with and without separators, national and international phones); the sentences come from two
disjoint template families: ``"dev"`` (looked at while building the recognisers) and
``"heldout"`` (only ever used to measure), so a recogniser tuned to one phrasing shows up as a
recall gap between the two.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

Family = Literal["dev", "heldout"]
LOCALES = ("en_US", "en_GB", "de_DE", "fr_FR", "es_ES", "it_IT", "nl_NL", "en_IE")

DEV_TEMPLATES: dict[str, list[str]] = {
    "PERSON": [
        "Hi, I'm {v}.",
        "My name is {v} and I need help.",
        "This is {v} from the finance team.",
        "Regards, {v}",
        "{v} here, quick question.",
        "Please ask {v} to call me back.",
    ],
    "EMAIL": ["Send the result to {v} please.", "You can reach me at {v}.", "email: {v}"],
    "PHONE": ["Call me on {v}.", "My number is {v}.", "phone {v} (evenings)"],
    "CARD": ["My card {v} was charged twice.", "Use card number {v} for it."],
    "SSN": ["My SSN is {v}.", "social security number {v}"],
    "IBAN": ["Wire it to {v}.", "My IBAN is {v}."],
    "ADDRESS": ["I live at {v}.", "Ship it to {v}."],
    "ACCOUNT": ["My account {v} is locked.", "Account number: {v}."],
}
HELDOUT_TEMPLATES: dict[str, list[str]] = {
    "PERSON": [
        "Hello, {v} speaking.",
        "Good morning! I am {v}.",
        "Thanks in advance, {v}",
        "My colleague {v} said you could help.",
        "It's {v} again.",
        "Dear support, {v} writing.",
    ],
    "EMAIL": ["Reply to {v} when done.", "cc {v} on this.", "my mail is {v}"],
    "PHONE": ["Text {v} if anything changes.", "Reach me at {v} after 5pm.", "tel: {v}"],
    "CARD": ["Charge {v} for the order.", "The visa ending in... actually the full number is {v}."],
    "SSN": ["SSN: {v}", "For the tax form, my social is {v}."],
    "IBAN": ["Refund to account {v} please.", "Bank details: {v}"],
    "ADDRESS": ["Deliver to {v} tomorrow.", "The invoice address is {v}."],
    "ACCOUNT": ["Customer account {v} needs an update.", "Ref {v}"],
}
QUESTIONS = [
    "What is {a}+{b}?",
    "What is {a} + {b}?",
    "Compute {a} plus {b}.",
    "{a} + {b} = ?",
    "What's the sum of {a} and {b}?",
]


HONORIFICS = {"Frau", "Herr", "Miss", "Mme", "Mlle", "Don", "Doña", "Sig", "Sr", "Sra"}


def name_parts(name: str) -> list[str]:
    """The identifying words of a planted name: honorifics and degrees ("Sig.ra", "Dipl.-Ing.",
    "MBA", "Frau") are not personal data and are left out."""
    parts = []
    for token in name.split():
        token = token.strip(",")
        if "." in token or token.isupper() or token in HONORIFICS:
            continue
        parts += [p for p in token.split("-") if len(p) > 1]
    return parts


def value_gone(kind: str, value: str, text: str) -> bool:
    """Whether a planted value no longer appears in ``text`` (a name: none of its words)."""
    if kind == "PERSON":
        return not any(re.search(rf"(?<!\w){re.escape(p)}(?!\w)", text) for p in name_parts(value))
    if kind == "ADDRESS":  # the street line
        street = value.split(",")[0]
        return (street if not street.strip().isdigit() else value) not in text
    return value not in text


@dataclass(frozen=True)
class LabelledText:
    """A text and the personal values planted in it, as (kind, value) pairs."""

    text: str
    labels: tuple[tuple[str, str], ...]

    def values(self, kind: str) -> list[str]:
        return [v for k, v in self.labels if k == kind]


def _luhn_digit(partial: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(partial)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def _card(fake, rng: random.Random) -> str:
    number = fake.credit_card_number()
    if rng.random() < 0.2:  # a 16-digit number from an issuer range Faker rarely picks
        partial = rng.choice(["4", "51", "52", "53", "54", "55", "6011"])
        partial += "".join(rng.choice("0123456789") for _ in range(15 - len(partial)))
        number = partial + _luhn_digit(partial)
    style = rng.random()
    if style < 0.4 or len(number) not in (15, 16):
        return number
    groups = (
        [number[i : i + 4] for i in range(0, 16, 4)]
        if len(number) == 16
        else [number[:4], number[4:10], number[10:]]
    )
    return (" " if style < 0.7 else "-").join(groups)


def _iban(fake, rng: random.Random) -> str:
    iban = fake.iban()
    if rng.random() < 0.5:
        return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    return iban


def _phone(fake, rng: random.Random) -> str:
    if rng.random() < 0.25:
        digits = "".join(rng.choice("0123456789") for _ in range(7))
        area = rng.choice(["212", "415", "617", "303", "512", "206"])
        return rng.choice(
            [f"({area}) {digits[:3]}-{digits[3:]}", f"{area}.{digits[:3]}.{digits[3:]}"]
        )
    return str(fake.phone_number())


def _value(kind: str, fake, rng: random.Random) -> str:
    if kind == "PERSON":
        return str(fake.name() if rng.random() < 0.7 else f"{fake.first_name()} {fake.last_name()}")
    if kind == "EMAIL":
        return str(fake.email())
    if kind == "PHONE":
        return _phone(fake, rng)
    if kind == "CARD":
        return _card(fake, rng)
    if kind == "SSN":
        return str(fake.ssn()) if fake.locales == ["en_US"] else _ssn(rng)
    if kind == "IBAN":
        return _iban(fake, rng)
    if kind == "ADDRESS":
        return str(fake.address()).replace("\n", ", ")
    if kind == "ACCOUNT":
        d = "".join(rng.choice("0123456789") for _ in range(11))
        return f"{d[:3]}-{d[3:5]}-{d[5:]}"
    raise ValueError(kind)


def _ssn(rng: random.Random) -> str:
    area = rng.randint(1, 665)
    return f"{area:03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"


def generate(n: int, *, seed: int = 0, family: Family = "dev") -> list[LabelledText]:
    """``n`` texts, each one arithmetic question preceded by one to three leaks."""
    from faker import Faker

    rng = random.Random(seed)
    fakers = {loc: Faker(loc) for loc in LOCALES}
    for i, fake in enumerate(fakers.values()):
        fake.seed_instance(seed * 1000 + i)
    us = Faker("en_US")
    us.seed_instance(seed * 1000 + 99)
    templates = DEV_TEMPLATES if family == "dev" else HELDOUT_TEMPLATES
    kinds = list(templates)
    out = []
    for _ in range(n):
        parts: list[str] = []
        labels: list[tuple[str, str]] = []
        for kind in rng.sample(kinds, rng.randint(1, 3)):
            fake = us if kind == "SSN" or rng.random() < 0.5 else fakers[rng.choice(LOCALES)]
            value = _value(kind, fake, rng)
            parts.append(rng.choice(templates[kind]).format(v=value))
            labels.append((kind, value))
        question = rng.choice(QUESTIONS).format(a=rng.randint(10, 99), b=rng.randint(10, 99))
        parts.insert(rng.randint(0, len(parts)), question)
        out.append(LabelledText(" ".join(parts), tuple(labels)))
    return out


@dataclass
class PlantedWindow:
    """What :func:`plant_window` wrote: planted values per trace and the counts a curate run
    must reproduce."""

    window: str
    labels: dict[str, list[tuple[str, str]]]
    by_user: dict[str, int]
    users: dict[str, str]
    unscored: list[str] | None = None
    flags: dict[str, str] | None = None  # trace id -> "errors" | "latency"

    def flagged(self, flag: str, *, excluding_user: str | None = None) -> int:
        skip = set(self.unscored or [])
        return sum(
            1
            for tid, f in (self.flags or {}).items()
            if f == flag and tid not in skip and self.users[tid] != excluding_user
        )

    def unscored_of(self, user: str) -> int:
        return sum(1 for tid in self.unscored or [] if self.users[tid] == user)


def plant_window(
    store,
    start,
    items,
    *,
    salt: str | None = None,
    users: int = 40,
    unscored: int = 0,
    seed: int = 0,
) -> PlantedWindow:
    """Write ``rollouts/`` and ``scores/`` for the window starting at ``start``: one prompt
    group of three sampled answers per item (rewards 0.9 / 0.8 / 0.4). ``items`` are
    :class:`LabelledText` (answers and contexts then echo planted values too, and a few traces
    carry errors, slow answers and one duplicate) or ``(question, user_id)`` pairs."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    from infra.keys import rollouts_key, scores_key, window_id
    from infra.settings import get_settings
    from tasks.collect import to_parquet

    salt = salt or get_settings().salt()
    rng = random.Random(seed)
    window = window_id(start)
    planted = PlantedWindow(window, {}, {}, {}, unscored=[], flags={})
    records: list = []
    rewards: dict[str, float] = {}
    labelled = [i for i in items if isinstance(i, LabelledText)]
    for g, item in enumerate(items):
        text, user = (item.text, f"user-{g % users}") if isinstance(item, LabelledText) else item
        labels = list(item.labels) if isinstance(item, LabelledText) else []
        contexts = [f"calculator: result = {rng.randint(20, 198)}"]
        if labelled and rng.random() < 0.3:
            crm = rng.choice(labelled)
            contexts.append(f"crm record: {crm.text}")
            labels += crm.labels
        base = rng.randint(20, 198)
        for s, reward in enumerate((0.9, 0.8, 0.4)):
            answer = f"The answer is {base + s}."
            if labels and s == 0 and rng.random() < 0.3:
                answer = f"Thanks {rng.choice(labels)[1]}! {answer}"
            tid = f"t-{window[:13]}-{g:04d}-{s}"
            fields = {"error_count": 0, "latency_s": 0.3}
            if labelled and len(records) % 17 == 5:
                fields["error_count"], planted.flags[tid] = 1, "errors"
            elif labelled and len(records) % 19 == 7:
                fields["latency_s"], planted.flags[tid] = 45.0, "latency"
            records.append(_record(tid, g, user, text, contexts, answer, start, fields))
            rewards[tid] = reward
            planted.labels[tid] = labels
            planted.users[tid] = user
    if unscored:
        planted.unscored = [r.trace_id for r in records[len(records) - unscored :]]
    if labelled:  # a second user sending the very same question and answer
        dup = records[0].model_copy(update={"trace_id": "t-duplicate", "user_id": "user-1"})
        records.append(dup)
        rewards[dup.trace_id], planted.labels[dup.trace_id] = (
            0.9,
            planted.labels[records[0].trace_id],
        )
        planted.users[dup.trace_id] = "user-1"
    for r in records:
        planted.by_user[r.user_id or ""] = planted.by_user.get(r.user_id or "", 0) + 1
    store.put(rollouts_key(window), to_parquet(records, window=window, salt=salt))
    scored = [r for r in records if r.trace_id not in set(planted.unscored)]
    cols = {
        "trace_id": [r.trace_id for r in scored],
        "prompt_group": [r.prompt_group for r in scored],
        **{c: [rewards[r.trace_id] for r in scored] for c in _REWARD_COLS},
        "missing": [[] for _ in scored],
        "reward_config_hash": ["test-config" for _ in scored],
        "judge_kind": ["verifier" for _ in scored],
        "ragas_mode": ["off" for _ in scored],
        "window": [window for _ in scored],
    }
    sink = io.BytesIO()
    pq.write_table(pa.table(cols), sink)
    store.put(scores_key(window), sink.getvalue())
    return planted


_REWARD_COLS = (
    "reward",
    "reward_judge",
    "reward_faithfulness",
    "reward_context_recall",
    "reward_feedback",
    "reward_latency",
)


def _record(tid, group, user, question, contexts, answer, start, fields):
    from datetime import timedelta

    from infra.traces import TraceRecord

    return TraceRecord(
        trace_id=tid,
        session_id=f"s-{user}",
        user_id=user,
        prompt_group=f"g-{start:%Y%m%d%H}-{group:04d}",
        question=question,
        contexts=list(contexts),
        answer=answer,
        model_version="v0",
        temperature=0.9,
        top_p=1.0,
        created_at=start + timedelta(seconds=group),
        **fields,
    )
