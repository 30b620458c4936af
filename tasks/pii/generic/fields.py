"""Which fields of a record are personal: the entity a key names (``fullName``, ``ship_to.name``,
``dateOfBirth``, ``passport.number``, ``emergency_contact``), and whether a value under it is
one (``"contact": "email"`` is a contact method, ``"driver": "nvidia-535"`` a software driver,
``"name"`` of a product is no person).

A key is normalised (``dateOfBirth`` -> ``date_of_birth``) and matched whole; a generic key
(``name``, ``number``, ``first``) takes its meaning from the key above it or from the keys
beside it. Values are checked by shape, never by a model: a name is letters (no digits), an
identifier holds digits, a phone 7-15 of them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

import regex as re

from tasks.pii.lexicon import STOP_WORDS, alternatives, word_list
from tasks.pii.names import NAME_PARTICLES as _PARTICLES
from tasks.pii.names import REPLIES, lexicon, lexicon_support

_ID = r"(?:_(?:no|nr|num|number|id|#))?"
_MEDICAL_HOLDERS = alternatives("fields_medical_id_holders")  # "patient", "member"
_PHONES = alternatives("fields_phone_keys")  # "phone", "mobile", "telefono"
# (entity, key regex matched against the whole normalised key); the first match wins
_KEY_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (entity, re.compile(rf"(?:[a-z0-9_]+_)?(?:{regex})"))
    for entity, regex in (
        ("EMAIL_ADDRESS", r"e_?mail(?:_addr(?:ess)?|_id)?"),
        ("IP_ADDRESS", r"ip(?:_addr(?:ess)?|_v[46])?"),
        ("DATE_OF_BIRTH", r"dob|d_o_b|date_of_birth|birth_?date|birth_?day|bday|born(?:_on)?"),
        ("PASSPORT", rf"passport{_ID}|travel_doc(?:ument)?{_ID}|pp_(?:no|nr|num|number)|ppt{_ID}"),
        (
            "DRIVER_LICENSE",
            rf"(?:drivers?_?|driving_)licen[cs]e{_ID}|licen[cs]e_(?:no|nr|num|number)|dl{_ID}",
        ),
        (
            "MEDICAL_ID",
            rf"mrn|medical_record{_ID}|hospital_(?:no|nr|num|number|id)|nhs{_ID}|"
            rf"(?:{_MEDICAL_HOLDERS})_(?:id|no|nr|number)|"
            rf"policy_(?:no|number)|health_card{_ID}|medicare{_ID}|medicaid{_ID}",
        ),
        ("US_SSN", rf"ssn|social_security{_ID}|itin|tax_id|tin"),
        ("UK_NINO", rf"nino|ni_(?:no|number)|national_insurance{_ID}"),
        ("CREDIT_CARD", rf"(?:credit_|debit_)?card{_ID}|cc{_ID}|pan"),
        (
            "BANK_ACCOUNT",
            rf"iban|bank_account{_ID}|account_(?:no|nr|num|number)|acct{_ID}|"
            r"routing(?:_number)?|sort_code|bsb|aba",
        ),
        ("SECRET", alternatives("fields_secret_keys")),
        (
            "PHONE_NUMBER",
            rf"(?:{_PHONES}){_ID}|"
            r"contact_(?:no|number)|"
            # a number named by when or how it is called: "callback number", "daytime number"
            r"(?:call_?back|daytime|evening|best)_(?:no|number)",
        ),
        (
            "ADDRESS",
            r"address(?:_?line)?(?:_?\d)?|addr(?:_?\d)?|street(?:_address)?|"
            r"ship_to|bill_to|deliver_to|mail_to|"
            # postcodes: a value needs a letter (valid_value), so a US ZIP (a town's worth of
            # doors) stays and a UK, Irish or Canadian one (a street's) goes
            r"post_?code|postal(?:_code)?|zip(?:_?code)?|eircode",
        ),
    )
)
# an address's unit ("unit": "Suite 1410") under an address key
_UNIT_KEYS = frozenset(word_list("fields_unit_keys"))
# an identity document's number: what the keys beside it say ("doc_type", "issuing_country")
_DOC_NUMBER_KEYS = frozenset(word_list("fields_doc_number_keys"))
# a bare "number" is a document's beside what only a document has (a card has an expiry too)
_DOC_ONLY_SIBLINGS = frozenset(word_list("fields_doc_only_siblings"))
# a record of an identity document ("kyc": {"type": "passport", "number": ...})
_DOC_PARENTS = frozenset(word_list("fields_doc_parents"))
_DOC_SIBLINGS = frozenset(word_list("fields_doc_siblings"))
# the words of an identity document's type ("id_card", "national_id", "residence_permit")
_PERSONAL_KINDS = frozenset(word_list("fields_personal_kinds"))
# keys that only a person's record has: a "name" beside them is a person's
_PERSON_SIBLINGS = frozenset(["nationality", "citizenship", "gender", "sex", "marital_status"])
_SECRET_PLACEHOLDER = re.compile(
    r"(?i)^(?:\$\{?|%\(|\{\{|os\.(?:environ|getenv)|process\.env|(?:get)?env\(|vault:|ref\+)"
)
_NOT_SECRET_KEY = re.compile(r"(?:page|next|sync|continuation|csrf)_token")
# keys that name whoever a record is about (a value under them is a person's name)
ROLES = frozenset(word_list("fields_roles"))
# roles that also name things: a value under them must look like a name, not just be letters
WEAK_ROLES = frozenset(word_list("fields_weak_roles"))
# the head nouns of fields that are no personal ones ("order number", "booking date")
FIELD_NOUNS = frozenset(word_list("asked_field_nouns"))
_NAME_KEYS = frozenset(word_list("fields_name_keys"))
_NOT_PERSON_KEYS = frozenset(["user_agent", "http_user_agent", "agent_version", "user_type"])
_GENERIC_NAME = frozenset(word_list("fields_generic_name"))
_GENERIC_ID = frozenset(word_list("fields_generic_id"))
_ADDRESS_PARENTS = frozenset(word_list("fields_address_parents"))
# a "name" under these is a product, place, company or plan, never a person
_THING_PARENTS = frozenset(word_list("fields_thing_parents"))
# keys beside a "name" that make its record a product's ("Harper Desk Lamp", price 34.00)
_THING_SIBLINGS = frozenset(word_list("fields_thing_siblings"))
_NULLISH = frozenset(set(word_list("fields_nullish")) | set(word_list("fields_nullish_2")))
_MASK = re.compile(r"^[*xX•#\-\s.]*\d{0,4}[*xX•#\-\s.]*$")
_NAME_SHAPE = re.compile(r"^\p{L}[\p{L}'’.,/\- ]*$")
# bare (unquoted) JSON values are identifiers written as numbers ("dob": 19870512)
BARE_TYPES = frozenset(
    [
        "PHONE_NUMBER",
        "DATE_OF_BIRTH",
        "PASSPORT",
        "DRIVER_LICENSE",
        "MEDICAL_ID",
        "US_SSN",
        "BANK_ACCOUNT",
        "CREDIT_CARD",
    ]
)


@dataclass(frozen=True)
class Field:
    """A value of a record: its key path (outermost first), the keys beside it, its span in
    the text, its (decoded) value and whether it is a bare JSON token (a number)."""

    path: tuple[str, ...]
    siblings: frozenset[str]
    start: int
    end: int
    value: str
    bare: bool = False
    kind: str = ""  # what its record says it is: the value under "type", "doc_type", "kind"


def norm_key(key: str) -> str:
    """``dateOfBirth`` -> ``date_of_birth``, ``Hospital Number`` -> ``hospital_number``,
    ``Prénom`` -> ``prenom``."""
    key = unicodedata.normalize("NFKD", key.strip())
    key = "".join(c for c in key if not unicodedata.combining(c))
    key = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_").lower()


def _singular(key: str) -> str:
    if key in ("children", "people"):
        return {"children": "child", "people": "person"}[key]
    return key[:-1] if key.endswith("s") and not key.endswith("ss") else key


def key_type(key: str) -> str | None:
    """The entity a key names on its own (``None``: not personal, or generic)."""
    k = norm_key(key)
    if not k or k in _GENERIC_NAME or k in _GENERIC_ID:
        return None
    if k in _NAME_KEYS or _person_key(k):
        return "PERSON"
    for entity, regex in _KEY_RULES:
        if regex.fullmatch(k):
            if entity == "SECRET" and _NOT_SECRET_KEY.search(k):
                return None
            return entity
    return None


def _person_key(k: str) -> bool:
    if k in _NOT_PERSON_KEYS:
        return False
    if k in ROLES or k.removesuffix("_name") in ROLES or k.removesuffix("_names") in ROLES:
        return True
    base = k.removesuffix("_name")
    tokens = base.split("_")
    # "lead_passenger", "secondary_driver", "emergency_contact_name"
    return any("_".join(tokens[i:]) in ROLES for i in range(1, len(tokens))) and (
        k.endswith("_name") or tokens[-1] in ROLES
    )


def weak_key(field: Field) -> bool:
    """Whether the field's key is a role that also names things (see :data:`WEAK_ROLES`)."""
    key = norm_key(field.path[-1]) if field.path else ""
    return key.removesuffix("_name") in WEAK_ROLES or key.split("_")[-1] in WEAK_ROLES


def thing_name(field: Field) -> bool:
    """Whether the field names a thing (``items[].name``, ``store.name``, ``product_name``):
    no person, whatever a model says of its value."""
    key = norm_key(field.path[-1]) if field.path else ""
    parent = _singular(norm_key(field.path[-2])) if len(field.path) > 1 else ""
    if key in ("name", "title") and parent in _THING_PARENTS or key in _THING_PARENTS:
        return True  # "store": {"name": ...}, or "product": "Kenneth Cole Reaction"
    return key.endswith("_name") and key.removesuffix("_name").split("_")[-1] in _THING_PARENTS


def field_type(field: Field) -> str | None:
    """The entity of ``field`` (its key, else its parent key or siblings), or ``None``."""
    key = norm_key(field.path[-1]) if field.path else ""
    parent = _singular(norm_key(field.path[-2])) if len(field.path) > 1 else ""
    own = key_type(key) if key else None
    if own == "ADDRESS" and key.startswith("line") and parent not in _ADDRESS_PARENTS:
        own = None
    if key in ("line1", "line_1", "line2", "line_2", "street") and parent in _ADDRESS_PARENTS:
        own = "ADDRESS"
    if key in _UNIT_KEYS and (parent in _ADDRESS_PARENTS or key_type(parent) == "ADDRESS"):
        own = "ADDRESS"
    siblings = {norm_key(s) for s in field.siblings}
    if key in _DOC_NUMBER_KEYS and siblings & _DOC_SIBLINGS and personal_kind(field.kind):
        own = "PASSPORT"
    if (
        key in ("number", "no")
        and (siblings & _DOC_ONLY_SIBLINGS or parent in _DOC_PARENTS)
        and personal_kind(field.kind)
    ):
        own = "PASSPORT"  # "doc": {"number": ..., "issuing_country": ...}
    if own is None and key in _GENERIC_ID and parent:
        parent_type = key_type(parent)
        own = parent_type if parent_type not in (None, "PERSON") else None
    if own is None and key in _GENERIC_NAME:
        if _person_context(key, parent, field.siblings):
            own = "PERSON"
        elif (
            key == "name"
            and parent not in _THING_PARENTS
            and not {norm_key(s) for s in field.siblings} & _THING_SIBLINGS
            and lexicon_support(field.value) == 2
        ):
            own = "PERSON"  # a record of someone, by the look of its value
    return own


_ICAO_CODES = "PIACV"  # the first letter of a travel document's code (ICAO Doc 9303)
# the passport word in its languages ("reisepass", "pasaporte")
_PASSPORT_STEMS = tuple(norm_key(w) for w in word_list("passport_words") if norm_key(w).isalpha())


def personal_kind(kind: str) -> bool:
    """Whether a record whose type is ``kind`` may be an identity document's: it says nothing,
    it is ICAO's one- or two-letter document code ("P", "PO", "ID": passports, identity cards,
    crew certificates, visas), or one of its words is a
    document's (:data:`_PERSONAL_KINDS`: "passport", "id_card", "driver_license"); not an
    invoice's, a purchase order's or a receipt's."""
    code, words = kind.strip().upper(), norm_key(kind).split("_")
    if not code or len(code) <= 2 and code[0] in _ICAO_CODES or not any(map(str.isalpha, words)):
        return True
    return any(w in _PERSONAL_KINDS or w.startswith(_PASSPORT_STEMS) for w in words)


def _person_context(key: str, parent: str, siblings: frozenset[str]) -> bool:
    if parent in _THING_PARENTS:
        return False
    if parent in ROLES or parent in _ADDRESS_PARENTS or parent in ("profile", "passport"):
        return True
    keys = {norm_key(s) for s in siblings}
    if key in ("first", "last", "given", "family") and keys & {"first", "last", "given", "family"}:
        return True
    if key != "name":
        return False
    keys.discard("name")
    if keys & _PERSON_SIBLINGS:
        return True
    return any(key_type(s) not in (None, "PERSON") or s in _NAME_KEYS for s in keys)


def valid_value(entity: str, value: str, *, bare: bool = False, weak: bool = False) -> bool:
    """Whether ``value`` under a field of ``entity`` is one (not empty, masked or a null);
    ``weak``: the key is a role that also names things (``driver``, ``manager``, ``owner``)."""
    v = value.strip()
    if not v or v.lower() in _NULLISH or (v.startswith("<") and v.endswith(">")):
        return False
    if bare and entity not in BARE_TYPES:
        return False
    digits = sum(c.isdigit() for c in v)
    if _MASK.match(v) and digits <= 4 and entity != "SECRET":
        return False
    if entity == "PERSON":
        return name_value(v, strong=not weak)
    check = _VALUE_CHECKS.get(entity)
    return check is None or check(v, digits)


def _phone(v: str, digits: int) -> bool:
    return 7 <= digits <= 15 and not re.search(r"[^\d\s()+\-./x]", v.lower().replace("ext", ""))


def _secret(v: str, _digits: int) -> bool:
    """``${DB_PASS}``, ``os.environ["X"]``: read from elsewhere, no secret."""
    return len(v) >= 4 and not set(v) <= set("*•x") and not _SECRET_PLACEHOLDER.match(v)


# a file's name, which no document prints: an underscore, a lower-case extension
_FILE_NAME = re.compile(r"_|\.[a-z][a-z0-9]{1,4}$")


def _document_number(v: str, digits: int) -> bool:
    """Digits and letters as a document prints them: never a file's name ("deck_v12.pptx")."""
    return digits >= 2 and 5 <= sum(c.isalnum() for c in v) <= 34 and not _FILE_NAME.search(v)


# what a value of each type has (value, its digit count); a type not here: anything not empty
_VALUE_CHECKS: dict[str, Callable[[str, int], bool]] = {
    "EMAIL_ADDRESS": lambda v, _d: "@" in v or " at " in v.lower(),
    "PHONE_NUMBER": _phone,
    "DATE_OF_BIRTH": lambda v, d: d >= 2 and len(v) <= 40,
    "CREDIT_CARD": lambda _v, d: 12 <= d <= 19,
    "BANK_ACCOUNT": lambda _v, d: d >= 6,
    "US_SSN": lambda _v, d: d >= 9,
    "PASSPORT": _document_number,
    "DRIVER_LICENSE": _document_number,
    "MEDICAL_ID": _document_number,
    "UK_NINO": _document_number,
    "SECRET": _secret,
    "IP_ADDRESS": lambda v, d: d >= 2 and ("." in v or ":" in v),
    "ADDRESS": lambda v, d: len(v) >= 5 and any(c.isalpha() for c in v) and (d > 0 or "," in v),
}


def name_value(value: str, *, strong: bool = True) -> bool:
    """A person's name as a record holds it: letters only (no digits, no ``@``, no ``_``),
    one to five words, with a capitalised word or a word the name lexicon knows (or, under a
    key that can only hold a name, two or more words in any case: ``kwame asante``)."""
    if not _NAME_SHAPE.match(value) or not 1 <= len(value.split()) <= 5:
        return False
    words = [w for w in re.findall(r"\p{L}[\p{L}'’-]*", value)]
    if not words or all(w.lower() in STOP_WORDS for w in words):
        return False
    firsts, lasts = lexicon()
    known = any(w.lower() in firsts or w.lower() in lasts for w in words)
    stop = [
        i for i, w in enumerate(words) if w.islower() and w in STOP_WORDS and w not in _PARTICLES
    ]
    if stop and (not strong or stop != [len(words) - 1] or len(words) < 2 or not known):
        # "User: my Galaxy Buds won't pair", "Customer: charged twice for one month": a
        # message, not a name; under a key that only holds one, a name may end with a word
        # that is also a stop word where the lexicon knows another ("nguyen van an", not
        # "tracking number is" or "email is d.okafor")
        return False
    if not strong and words[0].lower() in REPLIES:
        return False  # "User: yes please", "Agent: Thanks": a reply
    capitalised = any(w[0].isupper() and w.lower() not in STOP_WORDS for w in words)
    acronym = len(words) == 1 and words[0].isupper() and len(words[0]) <= 3
    if value.islower() and words[-1] in FIELD_NOUNS:
        return False  # "Customer: order number 77310045", "booking date 12/03/2025": a field
    # under a key that only holds a name, words in any case
    return known or (capitalised and not acronym) or (strong and len(words) >= 2)


def name_part(value: str) -> tuple[int, int]:
    """The leading name of a form value (``Jonas Krüger (+49 170 5558812)`` -> the name);
    ``(0, 0)`` when a digit is glued to it (``Mozilla/5.0`` is no name)."""
    m = re.match(r"[\s\"']*(\p{L}[\p{L}'’.,/\- ]*?)[\s,;\-–/.]*(?=[(<\[@\d]|$)", value)
    if not m or (m.end() < len(value) and value[m.end()].isdigit() and m.end(1) == m.end()):
        return (0, 0)
    return m.start(1), m.end(1)
