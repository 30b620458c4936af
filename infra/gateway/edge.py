"""The listeners' HTTP protocol: uvicorn's httptools protocol with the limits it lacks.

uvicorn's httptools server has no limit on a request head's size, no deadline for a head or
a body to arrive (a connection that sends nothing, or a byte a second, is held forever) and
only a global ``limit_concurrency`` that would also turn away the admin listener's rollback
webhook under load. Here, on every connection: a head over ``max_header_bytes`` gets 431, a
head not complete ``header_timeout_s`` after its first byte (or after the connection opened)
gets the connection closed, a body not complete ``body_timeout_s`` after the end of its head
gets 408 (the request never reaches the app's handler as a whole) and the connection closed;
on the public listener only: beyond ``max_connections`` open connections, or beyond
``max_connections_per_client`` from one peer address, a new one gets 503 and is closed (HTTP/1.1 serves one request per connection at a time, so this bounds the
requests in flight too). Without the body deadline, clients that send a head and then stall
in the body held every connection slot (70 of them locked out every other client for as
long as they liked).

The gateway speaks no WebSocket. uvicorn would hand an ``Upgrade: websocket`` request to its
WebSocket protocol (``websockets`` comes with ``uvicorn[standard]``), which takes the socket
over: this protocol's ``connection_lost`` then never runs, and each such connection kept a
public slot until restart (``max_connections`` upgrade requests from one unauthenticated
client, and every later connection, ``/healthz`` too, got 503). Here an upgrade request is an
ordinary request (the app answers it: there is no such route) and its connection is closed
after the answer, so the slot returns.

The refusals answer, half-close and drain for up to ``LINGER_S`` before closing (a lingering
close, as Apache and nginx do): closing at once while the client is still sending makes the
kernel answer the unread bytes with a reset, which can discard the 431, 408 or 503 before the
client reads it (RFC 9112 section 9.6).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.utils import get_local_addr

if TYPE_CHECKING:
    from infra.settings import GatewaySettings

_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
)
_BUSY_BODY = (
    b'{"error": {"message": "the gateway is at its connection limit", "type": "overloaded"}}'
)
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_BUSY_BODY), _BUSY_BODY)
)


_SLOW_BODY = (
    b'{"error": {"message": "the request body did not arrive in time '
    b'(FLYWHEEL_GATEWAY__BODY_TIMEOUT_S)", "type": "request_timeout"}}'
)
_TOO_SLOW = (
    b"HTTP/1.1 408 Request Timeout\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_SLOW_BODY), _SLOW_BODY)
)

LINGER_S = 2.0  # how long a refused connection is drained before it is closed


class GuardedProtocol(HttpToolsProtocol):
    """uvicorn's protocol with a head size limit, head and body deadlines and a connection
    limit on the public listener (class attributes, set by :func:`guarded_protocol`)."""

    max_header_bytes = 32 * 1024
    header_timeout_s = 10.0
    body_timeout_s = 30.0
    max_connections = 2048
    max_connections_per_client = 256  # 0: no cap
    admin_port: int | None = None
    public_open = 0  # open public connections in this process
    open_by_peer: ClassVar[dict[str, int]] = {}  # open public connections per peer address
    # told of each refusal at a limit ("client" or "total"): the gateway's metric
    on_refused: ClassVar[Callable[[str], None] | None] = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Count a public connection (or answer 503 and close at the limit) and start the head
        deadline."""
        super().connection_made(transport)
        self._head_bytes = 0  # bytes received while a head is incomplete
        self._head_parsed = 0  # bytes of the head's URL and headers
        self._in_head = True
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None
        self._in_body = False  # a request's head has ended, its body not yet
        self._body_timer: asyncio.TimerHandle | None = None
        self._linger: asyncio.TimerHandle | None = None
        local = get_local_addr(transport)
        self._public = local is None or local[1] != type(self).admin_port
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if self._public:
            cls, per_client = type(self), self.max_connections_per_client
            mine = cls.open_by_peer.get(self._peer, 0)
            full = cls.public_open >= self.max_connections
            if full or (per_client and mine >= per_client):
                self._public = False  # not counted: it is closed now
                self._refused = True
                if cls.on_refused is not None:
                    cls.on_refused("total" if full else "client")
                self._answer_and_close(_BUSY)
                return
            cls.public_open += 1
            cls.open_by_peer[self._peer] = mine + 1
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop counting the connection and cancel its head deadline."""
        if self._public:
            cls = type(self)
            cls.public_open -= 1
            left = cls.open_by_peer.get(self._peer, 1) - 1
            if left > 0:
                cls.open_by_peer[self._peer] = left
            else:
                cls.open_by_peer.pop(self._peer, None)  # the map holds open peers only
            self._public = False
        self._disarm()
        self._end_body()
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Parse ``data``, answering 431 once an incomplete head passes ``max_header_bytes``."""
        if self._refused:
            return
        if self._in_head:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._in_head and self._head_bytes > self.max_header_bytes:
            self._refuse()  # a head that does not end
        elif self._in_body and self._body_timer is None and not self._refused:
            # timed only once a read ends short of the body: most bodies come with their head
            self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_timeout)

    def _should_upgrade_to_ws(self) -> bool:
        """Never: the socket stays with this protocol, which counts it (module docstring)."""
        return False

    def _unsupported_upgrade_warning(self) -> None:
        """Nothing to log: any client can send the header (it is answered, then closed)."""

    def _refuse(self) -> None:
        self._refused = True
        self._disarm()
        if not self.transport.is_closing():
            self._answer_and_close(_TOO_LARGE)

    def _answer_and_close(self, response: bytes) -> None:
        """Write ``response``, half-close, and drop what the client still sends until it
        closes (EOF closes the transport) or ``LINGER_S`` passes."""
        self.transport.write(response)
        if not self.transport.can_write_eof():
            self.transport.close()
            return
        self.transport.write_eof()  # FIN once the answer is flushed
        self._linger = self.loop.call_later(LINGER_S, self.transport.close)

    def on_message_begin(self) -> None:
        """A new request: its head is counted and timed afresh."""
        super().on_message_begin()
        self._in_head = True
        self._head_parsed = 0
        self._arm()

    def on_url(self, url: bytes) -> None:
        """Count the URL towards the head size."""
        self._head_parsed += len(url)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        """Count the header towards the head size."""
        self._head_parsed += len(name) + len(value) + 4
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """Stop the head deadline; answer 431 instead of passing on a head over
        ``max_header_bytes``."""
        self._in_head = False
        self._head_bytes = 0
        self._disarm()
        if self._head_parsed > self.max_header_bytes:
            self._refuse()  # a head that arrived whole: never handed to the app
            return
        self._in_body = True  # the body deadline runs from now (armed in data_received)
        super().on_headers_complete()
        if self.parser.should_upgrade() and self.cycle is not None:
            self.cycle.keep_alive = False  # answered, then closed: nothing more is parsed here

    def on_body(self, body: bytes) -> None:
        """Pass the body on unless the request was refused."""
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        """Stop the body deadline; pass the request's end on unless it was refused."""
        self._end_body()
        if not self._refused:
            super().on_message_complete()

    def _end_body(self) -> None:
        self._in_body = False
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timeout(self) -> None:
        """The body is late: 408 while no response has begun (the handler waiting for the
        body is told the client has gone, so it answers nothing), else just close."""
        self._body_timer = None
        if not self._in_body or self.transport.is_closing():
            return
        if self.pipeline:  # queued behind a request still being answered: not late yet
            self._body_timer = self.loop.call_later(self.body_timeout_s, self._body_timeout)
            return
        self._end_body()
        self._refused = True  # what the client still sends is dropped
        self.flow.resume_reading()  # (paused while the handler had not read) to drain it
        cycle = self.cycle
        if cycle is not None and not cycle.response_started:
            cycle.disconnected = True
            cycle.message_event.set()
            self._answer_and_close(_TOO_SLOW)
        else:
            self.transport.close()

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timeout)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self._in_head and not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(
    cfg: GatewaySettings,
    *,
    admin_port: int | None,
    on_refused: Callable[[str], None] | None = None,
) -> type[GuardedProtocol]:
    """A :class:`GuardedProtocol` class with the gateway's limits (one per server), telling
    ``on_refused`` of each connection refused at a limit."""
    attrs: dict[str, Any] = {
        "max_header_bytes": cfg.max_header_bytes,
        "header_timeout_s": cfg.header_timeout_s,
        "body_timeout_s": cfg.body_timeout_s,
        "max_connections": cfg.max_connections,
        "max_connections_per_client": cfg.max_connections_per_client,
        "admin_port": admin_port,
        "public_open": 0,
        "open_by_peer": {},
        "on_refused": staticmethod(on_refused) if on_refused else None,
    }
    return type("GatewayProtocol", (GuardedProtocol,), attrs)


def server_options(cfg: GatewaySettings, *, admin_port: int | None, app: Any) -> dict[str, Any]:
    """uvicorn options of the gateway's server: uvloop, the guarded httptools protocol (its
    refusals counted on ``app``'s ``flywheel_connections_refused_total``), the keep-alive idle
    timeout, no proxy-header rewrite (:data:`~infra.gateway.asgi.SERVER_STACK`)."""
    refused = app.state.parts.metrics.connections_refused
    return {
        "proxy_headers": False,
        "loop": "uvloop",
        "http": guarded_protocol(
            cfg, admin_port=admin_port, on_refused=lambda limit: refused.labels(limit).inc()
        ),
        "ws": "none",  # no WebSocket route: an upgrade is answered as a request (module doc)
        "timeout_keep_alive": cfg.keep_alive_s,
    }
