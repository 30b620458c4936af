"""Who asks: the one key a chat request is routed by and heard by as a voice.

A request's key is its ``user`` (OpenAI's field) under the API key it shows (the same ``user``
under two API keys is two users), else its session (``X-Session-Id``, else the body's
``session_id``), else its client. Routing (:func:`infra.gateway.cohorts.decide`) and the
voice ledger (:mod:`infra.gateway.voices`) both take this key, so a client that sends no
``user`` (most applications on the openai SDK) sees one version for the whole canary step and
is one voice in it: were it routed at random per request but counted per address, every such
client would be in both arms, and "met an error" would grow with the share of its requests an
arm got.

The client is the connection's peer address, unless that peer is one of
``FLYWHEEL_GATEWAY__TRUSTED_PROXIES`` (addresses or CIDRs of the reverse proxies in front of
the gateway): then it is read from ``FLYWHEEL_GATEWAY__CLIENT_HEADER`` (default
``X-Forwarded-For``, every instance of it joined in order), from the right, the first address
that is not itself a trusted proxy. Each proxy appends the address it saw, so everything left
of that hop may be the client's own invention. This is the rule of uvicorn's
``ProxyHeadersMiddleware`` and of nginx's ``real_ip_recursive on``; uvicorn's own rewrite is
switched off (:data:`infra.gateway.asgi.SERVER_STACK`) because it trusts loopback by default,
where any local client could name itself anew in every request. A peer that is not a trusted
proxy is its own client, whatever headers it sends. Clients behind a trusted proxy that sends
no such header share the proxy's key. A single-address header (``X-Real-IP``) works the same
way; RFC 7239 ``Forwarded`` (``for=...`` pairs) is not read.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infra.gateway.chat_request import ChatRequest

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
MAX_HOP_CHARS = 64  # an address with a port fits; a longer hop is not an address

_SECRET_CONTEXT = b"flywheel canary buckets v1"


def request_key(req: ChatRequest) -> str | None:
    """The request's routing and voice key (None: neither a user, a session nor a client)."""
    return key_of(user=req.user_id, session=req.session_id, client=req.client, tenant=req.tenant)


def key_of(
    *,
    user: str | None = None,
    session: str | None = None,
    client: str | None = None,
    tenant: str | None = None,
) -> str | None:
    """The key of a requester: its user under its API key (``tenant``, :func:`tenant_of`: two
    applications' user ``1`` are two users), else its session, else its client's address, each
    in a namespace of its own (a user named like an address is not that address)."""
    if user:
        return f"u\x00{tenant or ''}\x00{user}"
    if session:
        return f"s\x00{session}"
    if client:
        return f"a\x00{client}"
    return None


def tenant_of(authorization: str | None) -> str | None:
    """The API key a request shows (``Authorization: Bearer``, the openai SDK's ``api_key``) as
    a short digest: the key itself is never held in a routing key (None: no key shown)."""
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return hashlib.blake2b(token.encode(), digest_size=8, person=b"flywheel-tenant").hexdigest()


def routing_secret(salt: str) -> bytes:
    """The key of the canary's bucket hash, derived from the deployment's user salt
    (``FLYWHEEL_USER_SALT``, which every gateway replica already shares: trace ids are signed
    with it). Without it a client could compute offline which user ids land in the canary."""
    return hmac.new(salt.encode(), _SECRET_CONTEXT, hashlib.sha256).digest()


def parse_networks(values: Sequence[str]) -> list[Network]:
    """Trusted proxies as networks (a bare address is a /32 or /128).

    Raises:
        ValueError: an entry that is neither an address nor a CIDR network.
    """
    out = []
    for value in values:
        try:
            out.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"{value!r} is not an IP address or CIDR network") from None
    return out


class ClientResolver:
    """The client address of a connection (see the module docstring)."""

    def __init__(self, trusted_proxies: Sequence[str], *, header: str = "x-forwarded-for") -> None:
        self.networks = parse_networks(trusted_proxies)
        self.header = header.lower()
        self.header_bytes = self.header.encode("latin-1")

    @property
    def enabled(self) -> bool:
        """Whether any proxy is trusted to name the client."""
        return bool(self.networks)

    def trusts(self, host: str) -> bool:
        """Whether ``host`` is a trusted proxy's address."""
        ip = _ip(host)
        return ip is not None and any(ip in net for net in self.networks)

    def resolve(self, peer: str | None, forwarded: Iterable[str] = ()) -> str | None:
        """The client of a connection from ``peer`` carrying ``forwarded`` (the values of the
        client header, in order; read only when ``peer`` is a trusted proxy)."""
        if peer is None or not self.networks or not self.trusts(peer):
            return peer
        hops = [_host(h) for value in forwarded for h in value.split(",") if h.strip()]
        for hop in reversed(hops):
            if not self.trusts(hop):
                return hop
        # every hop a trusted proxy: the leftmost is the client (uvicorn does the same)
        return hops[0] if hops else peer


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped  # a dual-stack socket's view of an IPv4 peer
    return ip


def _host(hop: str) -> str:
    """One hop of the header as an address: port and brackets dropped, written canonically
    (``::1`` and ``0::1`` are one client); anything else as it is, cut to ``MAX_HOP_CHARS``."""
    hop = hop.strip()[:MAX_HOP_CHARS]
    if hop.startswith("["):  # [v6]:port
        hop = hop[1:].split("]", 1)[0]
    elif hop.count(":") == 1:  # v4:port
        hop = hop.split(":", 1)[0]
    ip = _ip(hop)
    return hop if ip is None else str(ip)
