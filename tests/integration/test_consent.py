"""Opt-in consent as PIPA asks (issue 17): with no grant, or no user id, nothing reaches
training_examples; ``flywheel consent grant`` then a new window makes a user eligible;
``forget-user`` leaves a tombstone so their next trace is not eligible until they opt in anew;
the gateway's admin listener records consent with the admin token."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from infra.catalog import open_catalog, scan
from infra.privacy import user_key
from infra.settings import get_settings
from infra.store import open_store
from tests.data.pii_corpus import plant_window

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def _window(hour: int, users: list[str | None]) -> datetime:
    start = T0 + timedelta(hours=hour)
    items = [(f"What is {hour}+{i}?", u) for i, u in enumerate(users)]
    plant_window(open_store(get_settings()), start, items, users=len(users))
    from flows.curate import curate

    curate(window_start=start)
    return start


def _keys_in(window_start: datetime) -> set[str | None]:
    from infra.keys import window_id

    rows = scan(open_catalog(get_settings()), "training_examples").to_pylist()
    return {r["user_key"] for r in rows if r["window"] == window_id(window_start)}


def _cli(*argv: str) -> int:
    from deployments.cli import main

    return main(list(argv))


@pytest.fixture
def opt_in(flywheel_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FLYWHEEL_CONSENT_MODE")  # the default: opt_in
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    get_settings.cache_clear()
    assert get_settings().consent_mode == "opt_in"


def test_opt_in_grant_forget_and_opt_in_anew(prefect_api, opt_in) -> None:
    salt = get_settings().salt()
    alice, bob = user_key("alice", salt), user_key("bob", salt)
    assert _cli("consent", "grant", "bob") == 0

    w0 = _window(0, ["alice", "bob", None])
    assert _keys_in(w0) == {bob}  # no consent row, no user id: never trained on

    assert _cli("consent", "grant", "alice") == 0
    w1 = _window(1, ["alice", "bob", None])
    assert _keys_in(w1) == {alice, bob}

    from flows.governance import forget_user_id

    assert forget_user_id("alice").found
    w2 = _window(2, ["alice", "bob"])
    assert _keys_in(w2) == {bob}  # the tombstone outlives the erasure
    consent_keys = {
        r["user_key"] for r in scan(open_catalog(get_settings()), "consent").to_pylist()
    }
    assert alice not in consent_keys  # the tombstone is keyed by the receipt, not the key

    assert _cli("consent", "grant", "alice") == 0  # opting in anew
    w3 = _window(3, ["alice", "bob"])
    assert _keys_in(w3) == {alice, bob}

    assert _cli("consent", "withdraw", "bob") == 0
    w4 = _window(4, ["alice", "bob"])
    assert _keys_in(w4) == {alice}


def test_opt_out_mode_keeps_users_without_a_row(prefect_api, flywheel_home, monkeypatch) -> None:
    monkeypatch.setenv("FLYWHEEL_CURATE__K_ANONYMITY", "1")
    get_settings.cache_clear()
    assert get_settings().consent_mode == "opt_out"
    w0 = _window(0, ["carol", None])
    assert _keys_in(w0) == {user_key("carol", get_settings().salt()), None}


def test_admin_api_records_consent_with_the_token(tmp_path: Path) -> None:
    from tests.integration.test_gateway_admin import AUTH, settings_for, start

    with start(tmp_path) as gw:
        url = f"{gw.admin_url}/admin/consent"
        assert httpx.post(url, json={"user_id": "dave", "granted": True}).status_code == 401
        bad = httpx.post(url, json={"granted": True}, headers=AUTH)
        assert bad.status_code == 422
        resp = httpx.post(url, json={"user_id": "dave", "granted": True}, headers=AUTH)
        assert resp.status_code == 200, resp.text
        body = resp.json()
        assert body["granted"] is True and "dave" not in resp.text
    settings = settings_for(tmp_path)
    key = user_key("dave", settings.salt())
    assert body["user_key"] == key
    rows = scan(open_catalog(settings), "consent").to_pylist()
    assert [(r["user_key"], r["consent_to_training"]) for r in rows] == [(key, True)]
    from tasks.datasets import training_exclusions

    exclusions = training_exclusions(open_catalog(settings), mode="opt_in")
    assert key not in exclusions and user_key("erin", settings.salt()) in exclusions
    assert None in exclusions
