"""Client keys at rest and on the command line: only digests stored, a key shown once, a
revoked key kept (so revoking the last key does not open the gateway), voices capped per key
only while another key is active, and a rate limit per key."""

from __future__ import annotations

import json
from pathlib import Path

from infra.client_keys import create_key, read_keys, revoke_key
from infra.gateway.keyring import Caller, KeyRing, Refusal
from infra.settings import GatewaySettings
from infra.store import LocalStore
from tests.unit.test_cli_workloads import flywheel  # the CLI in a fresh process


def test_the_cli_creates_lists_and_revokes_without_storing_the_key(tmp_path: Path) -> None:
    made = flywheel("keys", "create", "support-app", "--rate", "600", "--json", home=tmp_path)
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    key = created["key"]
    assert key.startswith("fw-") and len(key) > 40 and created["rate_per_min"] == 600
    stored = (tmp_path / "fw" / "store" / "gateway" / "keys.json").read_text()
    assert key not in stored and key[3:20] not in stored

    listed = flywheel("keys", "list", home=tmp_path)
    assert listed.returncode == 0 and created["id"] in listed.stdout
    assert key not in listed.stdout and "active" in listed.stdout

    again = flywheel("keys", "create", "support-app", home=tmp_path)
    assert again.returncode != 0 and "active client key is named" in again.stderr
    revoked = flywheel("keys", "revoke", "support-app", home=tmp_path)  # by name, as listed
    assert revoked.returncode == 0, revoked.stderr
    assert created["id"] in revoked.stdout
    assert "revoked" in flywheel("keys", "list", home=tmp_path).stdout
    missing = flywheel("keys", "revoke", "key_00000000", home=tmp_path)
    assert missing.returncode != 0 and "no client key" in missing.stderr


def test_revoking_the_last_key_keeps_keyed_mode(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    ring = KeyRing(store, GatewaySettings())
    ring.refresh()
    assert not ring.keyed and isinstance(ring.check(None), Caller)
    entry, key = create_key(store, name="app")
    ring.refresh()
    assert isinstance(ring.check(f"Bearer {key}"), Caller)
    revoke_key(store, entry.id)
    ring.refresh()
    assert ring.keyed
    assert isinstance(ring.check(f"Bearer {key}"), Refusal)
    assert isinstance(ring.check(None), Refusal)
    assert read_keys(store).keys[0].revoked_at is not None


def test_voices_are_capped_per_key_only_while_another_key_is_active(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    ring = KeyRing(store, GatewaySettings(key_voices_per_step=5))
    first, first_key = create_key(store, name="only-app")
    ring.refresh()
    only = ring.check(f"Bearer {first_key}")
    assert isinstance(only, Caller) and only.quota is None  # the only client
    _, trusted_key = create_key(store, name="first-party", max_voices=0)
    _, big_key = create_key(store, name="big-partner", max_voices=50)
    ring.refresh()
    capped = ring.check(f"Bearer {first_key}")
    assert isinstance(capped, Caller) and capped.quota == (first.id, 5)
    trusted = ring.check(f"Bearer {trusted_key}")
    assert isinstance(trusted, Caller) and trusted.quota is None
    big = ring.check(f"Bearer {big_key}")
    assert isinstance(big, Caller) and big.quota is not None and big.quota[1] == 50


def test_rate_limit_refills_with_time(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    now = [0.0]
    ring = KeyRing(store, GatewaySettings(), clock=lambda: now[0])
    _, key = create_key(store, name="batch-job", rate_per_min=2)
    ring.refresh()
    header = f"Bearer {key}"
    assert isinstance(ring.check(header), Caller) and isinstance(ring.check(header), Caller)
    third = ring.check(header)
    assert isinstance(third, Refusal) and third.status == 429 and third.retry_after_s == 30
    now[0] = 30.0  # one request's worth refilled
    assert isinstance(ring.check(header), Caller)
    assert isinstance(ring.check(header), Refusal)
