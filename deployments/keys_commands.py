"""``flywheel keys``: the gateway's client API keys (:mod:`infra.client_keys`). ``create``
prints the new key once (it is stored only as a digest), ``list`` shows every key without it,
``revoke`` ends one. Gateways pick a change up within one poll of the store."""

from __future__ import annotations

import argparse
import json

from deployments.output import emit


def keys(ns: argparse.Namespace) -> int:
    """flywheel keys create NAME | list | revoke NAME."""
    from infra.client_keys import create_key, read_keys, revoke_key
    from infra.settings import get_settings
    from infra.store import open_store

    store = open_store(get_settings())
    if ns.keys_action == "create":
        entry, secret = create_key(
            store,
            name=ns.name,
            workloads=ns.workload or [],
            rate_per_min=ns.rate_per_min,
            max_voices=ns.max_voices,
        )
        emit(
            ns,
            "client key created (shown this once: store it now)",
            {**entry.public(), "key": secret},
        )
        return 0
    if ns.keys_action == "revoke":
        entry = revoke_key(store, ns.key)
        emit(ns, f"client key {entry.id} revoked", entry.public())
        return 0
    entries = read_keys(store).keys
    rows = [k.public() for k in entries]
    if getattr(ns, "json", False):
        print(json.dumps({"command": ns.command, "keys": rows}))
        return 0
    if not rows:
        print("no client keys: the gateway is in open mode (`flywheel keys create NAME`)")
        return 0
    for k in entries:
        state = f"revoked {k.revoked_at:%Y-%m-%d %H:%M}" if k.revoked_at else "active"
        limits = [
            f"workloads {','.join(k.workloads)}" if k.workloads else "any workload",
            f"{k.rate_per_min}/min" if k.rate_per_min else "no rate limit",
            "voices " + ("default" if k.max_voices is None else str(k.max_voices)),
        ]
        print(f"{k.id}  {k.hint}…  {k.name}  {state}  {'; '.join(limits)}")
    return 0
