"""Who asks (``infra.gateway.requester``): the client a trusted proxy names and the one a
hostile client claims to be, and canary buckets that no client can compute offline."""

from __future__ import annotations

import pytest

from infra.errors import ConfigError
from infra.gateway.cohorts import BUCKETS, bucket
from infra.gateway.requester import ClientResolver, key_of, routing_secret, tenant_of
from infra.settings import GatewaySettings

PROXIES = ClientResolver(["10.0.0.0/8", "192.168.1.1"])


def test_a_trusted_proxy_names_its_client_from_the_right() -> None:
    # the load balancer (192.168.1.1) appended what the ingress (10.1.2.3) told it, which
    # appended the real client (203.0.113.7); the left part is whatever the client sent
    chain = ["1.1.1.1, 203.0.113.7:51234, 10.1.2.3"]
    assert PROXIES.resolve("192.168.1.1", chain) == "203.0.113.7"
    # instances of the header joined in order (HAProxy adds a header line per hop)
    assert PROXIES.resolve("10.9.9.9", ["6.6.6.6", "203.0.113.7"]) == "203.0.113.7"
    assert PROXIES.resolve("10.9.9.9", ["[2001:db8::1]:443"]) == "2001:db8::1"
    # all hops trusted: the leftmost; no header at all: the proxy itself
    assert PROXIES.resolve("10.9.9.9", ["10.0.0.5, 10.0.0.6"]) == "10.0.0.5"
    assert PROXIES.resolve("10.9.9.9", []) == "10.9.9.9"
    # an IPv4 peer seen on a dual-stack socket is the same proxy
    assert PROXIES.resolve("::ffff:10.1.1.1", ["203.0.113.7"]) == "203.0.113.7"


def test_a_client_that_is_no_trusted_proxy_cannot_name_itself() -> None:
    for forged in (["203.0.113.7"], ["10.0.0.1"], ["garbage, 1.2.3.4"]):
        assert PROXIES.resolve("198.51.100.20", forged) == "198.51.100.20"
    nobody = ClientResolver([])  # the default: no proxy trusted, not even loopback
    assert nobody.resolve("127.0.0.1", ["203.0.113.7"]) == "127.0.0.1"
    assert not nobody.enabled


def test_trusted_proxies_must_be_addresses_or_networks() -> None:
    assert GatewaySettings(trusted_proxies=["10.0.0.0/8", "::1"]).trusted_proxies
    with pytest.raises(ValueError, match="'proxy.internal' is not an IP address"):
        GatewaySettings(trusted_proxies=["proxy.internal"])


def test_a_bad_trusted_proxy_variable_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from infra.settings import get_settings

    monkeypatch.setenv("FLYWHEEL_GATEWAY__TRUSTED_PROXIES", '["10.0.0.0/33"]')
    get_settings.cache_clear()
    try:
        with pytest.raises(ConfigError, match="TRUSTED_PROXIES"):
            get_settings()
    finally:
        get_settings.cache_clear()


def test_the_canary_cohort_cannot_be_computed_without_the_secret() -> None:
    """A client who knows the algorithm and the candidate's name (the salt) but not the
    deployment's secret guesses each id's arm at 50 % no better than a coin."""
    users = [f"u\x00user-{i}" for i in range(2000)]
    secret = routing_secret("the-deployment-salt")
    assert secret == routing_secret("the-deployment-salt")  # every replica computes the same
    assert secret != routing_secret("another-salt")
    keyed = {u for u in users if bucket(u, salt="v1", secret=secret) < BUCKETS // 2}
    guessed = {u for u in users if bucket(u, salt="v1") < BUCKETS // 2}
    other = {u for u in users if bucket(u, salt="v1", secret=routing_secret("x")) < BUCKETS // 2}
    agree = sum((u in keyed) == (u in guessed) for u in users) / len(users)
    assert 0.45 < agree < 0.55, agree
    assert abs(len(keyed) / len(users) - 0.5) < 0.03 and keyed != other
    assert bucket(users[0], salt="v1", secret=None) == bucket(users[0], salt="v1")


def test_a_user_is_a_user_of_the_api_key_it_shows() -> None:
    """Two applications on one gateway both have a user "1": two users, two routes, two
    voices; one application's user is one user whichever session or address it comes from."""
    app_a, app_b = tenant_of("Bearer sk-app-a-0123"), tenant_of("bearer sk-app-b-4567")
    assert app_a and app_b and app_a != app_b and "sk-app" not in app_a  # a digest, not the key
    assert key_of(user="1", tenant=app_a) != key_of(user="1", tenant=app_b)
    assert key_of(user="1", tenant=app_a, session="s", client="10.0.0.1") == key_of(
        user="1", tenant=tenant_of("Bearer sk-app-a-0123"), client="10.0.0.2"
    )
    assert (
        tenant_of(None) is None and tenant_of("Basic abc") is None and tenant_of("Bearer ") is None
    )
    # without a user the API key does not split a client: its session, else its address
    assert key_of(session="s", tenant=app_a) == key_of(session="s", tenant=app_b)
