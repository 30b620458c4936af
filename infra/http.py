"""The TLS settings every short-lived HTTP client of the process shares (:func:`tls`).

httpx builds a new SSL context for every client it creates, reading the whole CA bundle each
time: about 30 ms of CPU, so a one-off ``httpx.get`` costs more CPU than the loopback request it
sends. The canary's readers poll the gateway and Prometheus every few seconds for a whole
release; with a context per call they spent more CPU on certificates than on reading metrics.
Clients made for one call pass ``verify=tls()`` instead.
"""

from __future__ import annotations

import functools
import ssl

import httpx


@functools.cache
def tls() -> ssl.SSLContext:
    """httpx's default verification (certifi's bundle, or ``SSL_CERT_FILE`` /
    ``SSL_CERT_DIR`` when set), built once per process; contexts are safe to share between
    threads and clients."""
    return httpx.create_ssl_context()
