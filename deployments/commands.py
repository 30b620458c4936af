"""What each ``flywheel`` command does: start the stage's flow run (so it shows in the Prefect
UI) and print a short human summary. The parser and the command table are in
:mod:`deployments.cli`; every handler takes the parsed arguments and returns the exit code.

Flows and tasks are imported inside the handlers: ``flywheel --help`` stays fast."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Literal

Action = Literal["promote", "pause", "resume", "abort"]


# ------------------------------------------------------------------ stages 1-3 (hourly)


def collect(ns: argparse.Namespace) -> int:
    from flows.collect import collect as collect_flow

    r = collect_flow(window_start=ns.window_start, hours=ns.hours)
    print(
        f"collect {r.window}: {r.read} read, {r.written} written to {r.key}, "
        f"{r.quarantined} quarantined, {r.opted_out} opted out, {r.duplicates} duplicates"
    )
    return 0


def score(ns: argparse.Namespace) -> int:
    from flows.score import score as score_flow

    r = score_flow(window_start=ns.window_start, hours=ns.hours)
    print(r.message)
    return 0


def curate(ns: argparse.Namespace) -> int:
    from flows.curate import curate as curate_flow

    r = curate_flow(window_start=ns.window_start)
    pii = sum(r.pii_entities.values())
    print(
        f"curate {r.window}: {r.read} read, {r.written} written ({r.train} train, "
        f"{r.rejected_only} rejected-only), {r.k_withheld} held back for k-anonymity, "
        f"{r.released} released from earlier windows, {pii} PII entities removed, "
        f"dropped {dict(r.dropped)}"
    )
    return 0


# ------------------------------------------------------- the demo domain and the gateway


def bootstrap(ns: argparse.Namespace) -> int:
    from infra.runtime import Runtime
    from tasks.bootstrap import bootstrap_base_model

    rt = Runtime.from_env()
    r = bootstrap_base_model(rt.store, settings=rt.settings, seed=ns.seed, force=ns.force)
    how = "cached" if r.cached else f"built in {r.wall_s:.0f} s"
    print(f"bootstrap: {r.version} ({how}), golden accuracy {r.golden_accuracy:.1%}")
    return 0


def gateway(ns: argparse.Namespace) -> int:
    from infra.gateway.serve import serve_gateway
    from infra.settings import get_settings

    serve_gateway(get_settings(), announce=lambda line: print(line, flush=True))
    return 0


def simulate(ns: argparse.Namespace) -> int:
    from infra.settings import get_settings
    from tasks.simulate import simulate as simulate_users

    s = get_settings()
    url = ns.gateway_url or s.gateway.url or f"http://{s.gateway.host}:{s.gateway.port}"
    r = simulate_users(
        url, requests=ns.requests, concurrency=ns.concurrency, seed=ns.seed, settings=s
    )
    print(
        f"simulate: {r.succeeded}/{r.requests} requests ok ({r.failed} failed) from "
        f"{r.active_users} users, {r.requests_with_pii} with personal data, "
        f"{r.opted_out_requests} from opted-out users, feedback {dict(r.feedback)}, "
        f"accuracy {r.accuracy:.1%}, {r.wall_s:.0f} s"
    )
    return 0 if r.failed == 0 else 1


# ------------------------------------------------------------------------- governance


def forget_user(ns: argparse.Namespace) -> int:
    from flows.governance import forget_user_id

    r = forget_user_id(ns.user_id)
    print(
        f"forget-user: receipt {r.receipt}; rows deleted {r.rows_deleted}, "
        f"{r.objects_rewritten} objects rewritten, {r.objects_deleted} deleted, "
        f"{r.snapshots_expired} snapshots expired, {r.orphan_files_removed} files removed"
    )
    return 0


def retention(ns: argparse.Namespace) -> int:
    from flows.governance import retention as retention_flow

    r = retention_flow(days=ns.days)
    print(
        f"retention: {r.objects_deleted} objects deleted, {r.snapshots_expired} snapshots "
        f"expired, {r.orphan_files_removed} files removed"
    )
    return 0


def lineage(ns: argparse.Namespace) -> int:
    from tasks.train.lineage import lineage_for_user

    found = lineage_for_user(ns.user)
    if not found.versions:
        print("lineage: no model version was trained on this user's data")
    for version in found.versions:
        print(f"{version}\t(by {found.evidence[version]})")
    return 0


# ------------------------------------------------------------- stages 4-5 (weekly)


def train(ns: argparse.Namespace) -> int:
    from flows.loop import percent
    from flows.train import train as train_flow

    r = train_flow(method=ns.method, max_steps=ns.max_steps)
    print(f"train: {r.message}")
    if r.version:
        print(
            f"  {r.version} from {r.base_version} by {r.method} on {r.pairs} pairs; golden "
            f"accuracy {percent(r.golden_accuracy_base)} -> {percent(r.golden_accuracy)}"
        )
    return 0


def release(ns: argparse.Namespace) -> int:
    from flows.release import ReleaseOptions
    from flows.release import release as release_flow
    from infra.models import ServableVersions
    from infra.runtime import Runtime

    rt = Runtime.from_env()  # checked before a flow run starts: one line, routing untouched
    ServableVersions.from_settings(rt.settings, rt.store).require(ns.version)
    r = release_flow(ns.version, ReleaseOptions(force=ns.force, skip_shadow=ns.skip_shadow))
    print(f"release {r.version}: {r.outcome} ({r.phase}); " + "; ".join(r.reasons))
    if r.gate:
        g = r.gate
        print(
            f"  gate {g.get('decision')}: reward {g.get('mean_baseline'):.3f} -> "
            f"{g.get('mean_candidate'):.3f}, p = {g.get('p_value'):.2g}, n = {g.get('n')}"
        )
    return 0 if r.outcome in ("promoted", "held", "stable") else 1


# ------------------------------------------------------------------- release controls


def status(ns: argparse.Namespace) -> int:
    from infra.routing import open_routing
    from infra.runtime import Runtime
    from tasks.release.controls import release_status

    rt = Runtime.from_env()
    routing = open_routing(rt.settings, rt.store)
    print(json.dumps(release_status(routing), indent=2, default=str))
    return 0


def promote(ns: argparse.Namespace) -> int:
    from infra.errors import ReleaseError
    from infra.models import ServableVersions
    from infra.routing import open_routing
    from infra.runtime import Runtime
    from tasks.release.controls import promotion_refusal

    if ns.force and not (ns.reason or "").strip():
        raise ReleaseError("promote --force needs --reason TEXT (recorded in the audit log)")
    ns.reason = ns.reason or "manual"
    rt = Runtime.from_env()  # checked before a flow run starts; the flow checks again
    versions = ServableVersions.from_settings(rt.settings, rt.store)
    state = open_routing(rt.settings, rt.store).load()
    if why := promotion_refusal(state, versions=versions, force=ns.force, reason=ns.reason):
        raise ReleaseError(why)
    return _control("promote", ns, force=ns.force)


def pause(ns: argparse.Namespace) -> int:
    return _control("pause", ns)


def resume(ns: argparse.Namespace) -> int:
    from infra.models import ServableVersions
    from infra.routing import open_routing
    from infra.runtime import Runtime

    rt = Runtime.from_env()  # checked before a flow run starts; the flow checks again
    if (candidate := open_routing(rt.settings, rt.store).load().candidate) is not None:
        ServableVersions.from_settings(rt.settings, rt.store).require(candidate)
    return _control("resume", ns)


def abort(ns: argparse.Namespace) -> int:
    return _control("abort", ns)


def _control(action: Action, ns: argparse.Namespace, *, force: bool = False) -> int:
    from flows.release import release_control

    state = release_control(action, reason=ns.reason, actor=ns.actor, force=force)
    print(
        f"{action}: stable {state.get('stable')}, candidate {state.get('candidate')}, "
        f"phase {state.get('phase')}, weight {state.get('weight')}"
    )
    return 0


def rollback(ns: argparse.Namespace) -> int:
    from flows.rollback import rollback as rollback_flow

    result = rollback_flow(reason=ns.reason, actor=ns.actor)
    if result.get("restored_stable"):
        print(
            f"rollback: the stable version {result['unservable_stable']} cannot be served; "
            f"{result['restored_stable']} is the stable version again",
            file=sys.stderr,
        )
    print(f"rollback: {result}")
    return 0


# ---------------------------------------------------------------------- the whole loop


def run(ns: argparse.Namespace) -> int:
    from flows.loop import LoopOptions, loop_report, run_loop

    opts = LoopOptions(cycles=ns.cycles, seed=ns.seed)
    if ns.requests:
        opts.requests = ns.requests
    print(loop_report(run_loop(opts)))
    return 0
