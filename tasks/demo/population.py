"""The demo's simulated population: a seeded Faker population with ids, names, emails,
phones, cards, addresses, SSNs, IBANs and accounts, each with a habit of leaking some of it in
one or two preambles (:mod:`tasks.demo.simulate` sends their requests)."""

from __future__ import annotations

import random
from dataclasses import dataclass

PREAMBLES = [
    "Hi, I'm {name} ({email}).",
    "Hi, I'm {name}, card {card}.",
    "This is {name} from {address}.",
    "My account is {account} and my phone is {phone}.",
    "Hello! {name} here, SSN {ssn}.",
    "I'm {name}, IBAN {iban}, call me at {phone}.",
    "Email me at {email} when done.",
    "{name} here.",
]


@dataclass(frozen=True)
class SimUser:
    """A simulated user: id, name, contact data, consent and temperament."""

    user_id: str
    name: str
    email: str
    phone: str
    card: str
    address: str
    ssn: str
    iban: str
    account: str
    opted_out: bool
    leak_rate: float
    preambles: tuple[int, ...]

    def pii(self) -> dict[str, str]:
        """The user's personal data as it may appear in a message."""
        fields = ("name", "email", "phone", "card", "address", "ssn", "iban", "account")
        return {f: getattr(self, f) for f in fields}


def build_population(n_users: int, *, seed: int, opt_out_fraction: float = 0.1) -> list[SimUser]:
    """``n_users`` users with stable ids and personal data (same seed, same people)."""
    from faker import Faker

    fake = Faker("en_US")
    fake.seed_instance(seed)
    rng = random.Random(seed)
    opted = set(rng.sample(range(n_users), round(n_users * opt_out_fraction)))
    users = []
    for i in range(n_users):
        card = fake.credit_card_number(card_type="visa16")
        if rng.random() < 0.5:  # people type cards with spaces as often as without
            card = " ".join(card[j : j + 4] for j in range(0, len(card), 4))
        account = f"{rng.randint(100, 999)}-{rng.randint(10, 99)}-{rng.randint(100000, 999999)}"
        users.append(
            SimUser(
                user_id=f"user-{fake.uuid4()[:12]}",
                name=fake.name(),
                email=fake.email(),
                phone=fake.phone_number(),
                card=card,
                address=fake.address().replace("\n", ", "),
                ssn=fake.ssn(),
                iban=fake.iban(),
                account=account,
                opted_out=i in opted,
                leak_rate=rng.choice([0.0, 0.2, 0.5, 0.8]),
                preambles=tuple(rng.sample(range(len(PREAMBLES)), rng.choice([1, 2]))),
            )
        )
    return users
