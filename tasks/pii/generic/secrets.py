"""Secrets users paste into chat: cloud and SaaS keys by their published prefixes, JWTs,
private-key blocks, an AWS secret key beside its access key id, whatever follows "password
is" / "password for the portal:" / "api key:" / "token=", the password of a connection string
(``postgres://user:PASSWORD@host``, placeholders such as ``${DB_PASS}`` stay) or of a command
line (``curl -u user:PASSWORD``, ``--password=...``, ``Authorization: Basic ...``), and a
password-shaped value after "the new one is" (not a code of capitals and digits such as
"WR-22817"). A relative clause may stand between the word and the value ("the password I set
is ...", "the pin we agreed on was ...").

A keyed value ("password: hunter2") is a secret when the key is explicit (``:``, ``=``, "is",
quotes) and the value looks like one (a digit or a symbol, or it was quoted or given after
``:``/``=``); "my password is not working" and "password reset link" stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import regex as re

from tasks.pii.lexicon import alternatives, word_list

# published token shapes: AWS access key ids, Stripe, GitHub, Slack, Google, OpenAI-style,
# Anthropic-style, Telegram bot tokens, Twilio, SendGrid, npm, JWTs, PEM private keys
_AWS_KEY_PREFIXES = alternatives("secrets_aws_key_prefixes")
_TOKENS = re.compile(
    r"(?<![\w])(?:"
    rf"(?:{_AWS_KEY_PREFIXES})"
    r"[A-Z0-9]{16}"
    r"|(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|whsec_[A-Za-z0-9]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AIza[0-9A-Za-z_-]{30,}"
    r"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"
    r"|\d{8,10}:AA[A-Za-z0-9_-]{30,}"
    r"|SK[0-9a-f]{32}|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"
    r"|npm_[A-Za-z0-9]{30,}|glpat-[A-Za-z0-9_-]{20,}"
    # Slack app-level, Shopify, Hugging Face, DigitalOcean, Google OAuth, Square, Brevo, Groq
    r"|xapp-[A-Za-z0-9-]{10,}|shp(?:at|ss|ca|pa)_[A-Fa-f0-9]{32}|hf_[A-Za-z0-9]{30,}"
    r"|do[opr]_v1_[a-f0-9]{64}|ya29\.[A-Za-z0-9_-]{20,}|sq0(?:atp|csp)-[A-Za-z0-9_-]{20,}"
    r"|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}|gsk_[A-Za-z0-9]{40,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")(?![\w])"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9/]+"
)
# the words that name a secret before its value (a bare "pass" only as a key: "pass: x",
# "pass=x"; a boarding or day pass is no secret), and what opens a network ("the wifi key is
# ...", "WPA2 passphrase: ...")
_KEY_WORDS = alternatives("secrets_key_words")
_OPENS_PREPOSITIONS = alternatives("secrets_opens_prepositions")  # "for", "of", "to", "on"
_PRONOUNS = alternatives("secrets_pronouns")  # "i", "we", "you"
_ADVERBS = alternatives("secrets_adverbs")  # "is still", "is now", "is temporarily"
_KEYED = re.compile(
    rf"(?i)(?<![a-z])(?:{_KEY_WORDS})(?![a-z])"
    # "the password for the shared box is ...": a few words naming what it opens
    rf"(?:\s+(?:{_OPENS_PREPOSITIONS})\s+"
    r"(?:the\s+|my\s+|our\s+|your\s+)?[\w-]+(?:\s+[\w-]+)?"
    r"(?=\s+(?:is|was)\s|\s*[:=]\s))?"
    # "the password I set is ...", "the pin we agreed on was ...", "my password that I reset
    # yesterday is ...": a relative clause of a person and a few words before "is"/"was"
    rf"(?:\s+(?:that\s+|which\s+)?(?:{_PRONOUNS})"
    r"(?:\s+[\w']+){1,4}?"
    r"(?=\s+(?:is|was)\s))?"
    r"(?P<sep>\s*(?:[\"']?\s*[:=]\s*|\s+(?:is|was|:)\s+|\s+(?:is\s+)?now\s+|\s+to\s+|\s+)"
    rf"(?:(?:{_ADVERBS})\s+)?)"
    r"(?P<q>[\"'`“‘]?)(?P<value>[^\s\"'`”’]{4,200})"
)
_PIN = re.compile(r"(?i)(?:pin|passcode|pass\s*code|비밀번호)")
# a gift card's or voucher's PIN unlocks a balance, not a person's account
_GIFT = re.compile(r"(?i)(?:gift|voucher|e-?gift|store\s+credit|reward|prepaid)[\w\s-]{0,20}$")
# an AWS secret access key: 40 characters of base64, next to an access key id in the text
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_KEY_ID = re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")
# "the new one is kettle-Marsh-91", "temp pw was ...": a password without the word password
_NEW_ONE = re.compile(
    r"(?i)(?<![a-z])(?:(?:the|my)\s+)?(?:new|old|temp|temporary)\s+one\s*(?:is|was|:|=)\s*"
    r"[\"'`“‘]?(?P<value>[^\s\"'`”’]{6,64})"
)
# capitals and digits in dash-joined groups ("WR-22817"): a reference number's shape, which
# "the new one is" gives as often as a password without the word password
_REFERENCE_CODE = re.compile(r"[A-Z0-9]+(?:[-/][A-Z0-9]+)+")
# a login given as a pair, user then password: "ssh login is deploy / Qw!8zLp#44vN",
# "creds: admin:Hunter#22" (the password-shaped second value is the secret)
_LOGIN_PAIR = re.compile(
    r"(?i)(?<![a-z])(?:log-?in|credentials|creds|user(?:name)?\s*/\s*pass(?:word)?)"
    r"\s*(?:is|are|:|=)?\s*[^\s/:]{2,64}\s*[/:]\s*(?P<value>[^\s\"'`]{6,64})"
)
# a password given to a command line: "curl -u admin:PASSWORD", "wget --password=...",
# "mysql -u root -pPASSWORD", "Authorization: Basic dXNlcjpwYXNz" (user:password in base64)
_COMMAND_LINE = re.compile(
    r"(?<![\w-])(?:(?:-u|--user|--proxy-user)[\s=]+[\"']?[^\s:\"']{1,64}:"
    r"|--(?:http-|ftp-)?password[\s=]+[\"']?|-p[\"']?(?=[^\s\"']*\d)"
    r"|(?i:authorization:\s*basic)\s+)"
    r"(?P<value>[^\s\"'`]{4,200})"
)
# a password given as the argument after a flag that takes one ("sshpass -p X", "docker login
# -u u -p X", "redis-cli -a X", "--token X"), or as htpasswd's last argument; a port after
# -p ("ssh -p 2222") has no letters, a file after --password-file is a path
_FLAG_ARGUMENT = re.compile(
    r"(?<![\w-])(?:-p|-a|--pass(?:word|wd)?|--token|--api-key|--secret|--auth-token)\s+"
    r"[\"']?(?P<value>[^\s\"'`]{6,200})"
    r"|(?<![\w-])htpasswd\s+(?:-\w+\s+)*\S+\s+\S+\s+[\"']?(?P<value>[^\s\"'`]{6,200})"
)
# PHP's define('DB_PASSWORD', '...'), WordPress salts and keys
_DEFINE = re.compile(
    r"(?i)define\(\s*[\"'][A-Z_]*(?:PASS(?:WORD)?|SECRET|KEY|TOKEN|SALT)[A-Z_]*[\"']\s*,\s*"
    r"[\"'](?P<value>[^\"']{4,200})[\"']"
)
# the password of a connection string or URL: scheme://user:PASSWORD@host
_URL_PASSWORD = re.compile(
    r"(?i)(?<![\w+.-])[a-z][a-z0-9+.-]{1,20}://[^\s:/@\"'`]{1,64}:(?P<value>[^\s@/\"'`]{3,128})@"
    r"(?=[\w\[])"
)
# what documentation writes there instead of a password
_PLACEHOLDER_WORDS = alternatives("secrets_placeholders")
_PLACEHOLDER = re.compile(
    rf"(?i)^(?:\*+|x+|\.+|{_PLACEHOLDER_WORDS}"
    r"|<.*|\$\{?.*|%.*|\{.*"
    # code reading it from elsewhere: os.environ["X"], os.getenv(...), process.env.X, env(...)
    r"|os\.(?:environ|getenv).*|process\.env.*|(?:get)?env\(.*|vault:.*|ref\+.*)$"
)
_STRONG_SEP = re.compile(r"[:=]|\bis\b|\bwas\b|\bto\b|\bnow\b")
_TRAILING = ".,;:!?)]}>"
_COMMON = frozenset(word_list("secrets_common"))


def _looks_secret(value: str, quoted: bool, sep: str) -> bool:
    if value.lower() in _COMMON:
        return False
    symbolic = any(not c.isalpha() for c in value) or (
        any(c.isupper() for c in value[1:]) and any(c.islower() for c in value)
    )
    return symbolic or quoted or "=" in sep or ":" in sep


def _password_shape(value: str) -> bool:
    """Letters and digits and a symbol or mixed case: how a chosen password looks."""
    letters = [c for c in value if c.isalpha()]
    digits = any(c.isdigit() for c in value)
    symbol = any(not c.isalnum() for c in value)
    mixed = any(c.isupper() for c in letters) and any(c.islower() for c in letters)
    return bool(letters) and digits and (symbol or mixed)


# a secret given after a cue (a command line's password, a flag's argument, a login pair, "the
# new one is ..."): which of the values after it is one, read without trailing punctuation
_AFTER_CUE: tuple[tuple[re.Pattern[str], Callable[[str], bool]], ...] = (
    (_COMMAND_LINE, lambda v: not _PLACEHOLDER.match(v) and (_password_shape(v) or len(v) >= 12)),
    (_FLAG_ARGUMENT, lambda v: not _PLACEHOLDER.match(v) and _password_shape(v) and "/" not in v),
    (_LOGIN_PAIR, _password_shape),
    (_NEW_ONE, lambda v: _password_shape(v) and not _REFERENCE_CODE.fullmatch(v)),
)


def secret_spans(text: str, _nlp: object = None) -> Iterator[tuple[int, int]]:
    """Spans of pasted secrets in ``text``."""
    for m in _TOKENS.finditer(text):
        yield m.start(), m.end()
    yield from _aws_secret_spans(text)
    for pattern, accept in _AFTER_CUE:
        for m in pattern.finditer(text):
            value = m.group("value").rstrip(_TRAILING)
            if accept(value):
                yield m.start("value"), m.start("value") + len(value)
    for pattern in (_DEFINE, _URL_PASSWORD):  # the whole value, quoted or delimited
        for m in pattern.finditer(text):
            if not _PLACEHOLDER.match(m.group("value")):
                yield m.span("value")
    yield from _keyed_spans(text)


def _aws_secret_spans(text: str) -> Iterator[tuple[int, int]]:
    """An AWS secret key beside an access key id: 40 characters of mixed case and digits."""
    if not _AWS_KEY_ID.search(text):
        return
    for m in _AWS_SECRET.finditer(text):
        value = m.group(0)
        if (
            sum(c.isdigit() for c in value)
            and any(c.isupper() for c in value)
            and any(c.islower() for c in value)
        ):
            yield m.span()


def _keyed_spans(text: str) -> Iterator[tuple[int, int]]:
    """Values after a secret's key (``password=``, ``PIN:``, ``"api_key": "..."``)."""
    for m in _KEYED.finditer(text):
        value = m.group("value").rstrip(_TRAILING)
        if _PIN.match(m.group(0)) and value.isdigit() and 4 <= len(value) <= 8:
            if not _GIFT.search(text[max(0, m.start() - 30) : m.start()]):
                yield m.start("value"), m.start("value") + len(value)
            continue
        weak = len(value) < 4 or not _STRONG_SEP.search(m.group("sep")) and not m.group("q")
        if weak and (not any(c.isdigit() for c in value) or len(value) < 6):
            continue
        if _PLACEHOLDER.match(value):
            continue
        if _looks_secret(value, bool(m.group("q")), m.group("sep")):
            yield m.start("value"), m.start("value") + len(value)
