"""The ``flywheel`` command: each stage command starts the stage's Prefect flow run (so it
shows in the UI) and prints a short human summary."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from infra.settings import prepare_environment

Handler = Callable[[argparse.Namespace], int]
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], Handler]] = {}


def command(
    name: str, help_text: str, args: Callable[[argparse.ArgumentParser], None] | None = None
):
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = (help_text.replace("%", "%%"), args or (lambda p: None), fn)
        return fn

    return register


def _window_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--window-start", help="ISO hour, e.g. 2026-11-22T10:00:00Z (default: last closed hour)"
    )
    p.add_argument("--hours", type=int, default=1, help="window length in hours (default 1)")


@command("collect", "stage 1: read a window of traces into rollouts/", _window_args)
def _collect(ns: argparse.Namespace) -> int:
    from flows.collect import collect

    r = collect(window_start=ns.window_start, hours=ns.hours)
    print(
        f"collect {r.window}: {r.read} read, {r.written} written to {r.key}, "
        f"{r.quarantined} quarantined, {r.opted_out} opted out, {r.duplicates} duplicates"
    )
    return 0


@command("score", "stage 2: composite reward for every trace of a window", _window_args)
def _score(ns: argparse.Namespace) -> int:
    from flows.score import score

    r = score(window_start=ns.window_start, hours=ns.hours)
    print(r.message)
    return 0


def _curate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window-start", help="ISO hour (default: last closed hour)")


@command("curate", "stage 3: gates, consent, anonymisation, k-anonymity into Iceberg", _curate_args)
def _curate(ns: argparse.Namespace) -> int:
    from flows.curate import curate

    r = curate(window_start=ns.window_start)
    pii = sum(r.pii_entities.values())
    print(
        f"curate {r.window}: {r.read} read, {r.written} written ({r.train} train, "
        f"{r.rejected_only} rejected-only), {r.k_withheld} held back for k-anonymity, "
        f"{r.released} released from earlier windows, {pii} PII entities removed, "
        f"dropped {dict(r.dropped)}"
    )
    return 0


def _bootstrap_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="rebuild even if cached")


@command("bootstrap", "build the demo domain's base model v0 locally (cached)", _bootstrap_args)
def _bootstrap(ns: argparse.Namespace) -> int:
    from infra.runtime import Runtime
    from tasks.bootstrap import bootstrap_base_model

    rt = Runtime.from_env()
    r = bootstrap_base_model(rt.store, settings=rt.settings, seed=ns.seed, force=ns.force)
    how = "cached" if r.cached else f"built in {r.wall_s:.0f} s"
    print(f"bootstrap: {r.version} ({how}), golden accuracy {r.golden_accuracy:.1%}")
    return 0


@command("gateway", "serve the OpenAI-compatible gateway (FLYWHEEL_GATEWAY__HOST/PORT)")
def _gateway(ns: argparse.Namespace) -> int:
    from infra.gateway.serve import serve_gateway
    from infra.settings import get_settings

    serve_gateway(get_settings())
    return 0


def _simulate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--requests", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gateway-url", help="default: FLYWHEEL_GATEWAY__URL or host:port")


@command("simulate", "simulated users through the gateway (PII, consent, feedback)", _simulate_args)
def _simulate(ns: argparse.Namespace) -> int:
    from infra.settings import get_settings
    from tasks.simulate import simulate

    s = get_settings()
    url = ns.gateway_url or s.gateway.url or f"http://{s.gateway.host}:{s.gateway.port}"
    r = simulate(url, requests=ns.requests, concurrency=ns.concurrency, seed=ns.seed, settings=s)
    print(
        f"simulate: {r.succeeded}/{r.requests} requests ok ({r.failed} failed) from "
        f"{r.active_users} users, {r.requests_with_pii} with personal data, "
        f"{r.opted_out_requests} from opted-out users, feedback {dict(r.feedback)}, "
        f"accuracy {r.accuracy:.1%}, {r.wall_s:.0f} s"
    )
    return 0 if r.failed == 0 else 1


def _forget_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("user_id", help="the raw user id; hashed here, never sent to Prefect")


@command(
    "forget-user", "erase one user's data everywhere (tables, raw objects, old files)", _forget_args
)
def _forget(ns: argparse.Namespace) -> int:
    from flows.governance import forget_user_id

    r = forget_user_id(ns.user_id)
    print(
        f"forget-user: receipt {r.receipt}; rows deleted {r.rows_deleted}, "
        f"{r.objects_rewritten} objects rewritten, {r.objects_deleted} deleted, "
        f"{r.snapshots_expired} snapshots expired, {r.orphan_files_removed} files removed"
    )
    return 0


def _retention_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--days", type=int, help="default: FLYWHEEL_RAW_RETENTION_DAYS")


@command("retention", "delete raw traces/rollouts/scores past retention", _retention_args)
def _retention(ns: argparse.Namespace) -> int:
    from flows.governance import retention

    r = retention(days=ns.days)
    print(
        f"retention: {r.objects_deleted} objects deleted, {r.snapshots_expired} snapshots "
        f"expired, {r.orphan_files_removed} files removed"
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flywheel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add_args, _fn) in COMMANDS.items():
        add_args(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def _register_more() -> None:
    import infra.cli_release  # noqa: F401 - registers its commands


def _quiet_libraries() -> None:
    """Library deprecation chatter is for developers, not for someone reading a run summary."""
    import warnings

    for module in ("transformers", "trl", "torch", "peft", "pyiceberg", "datasets", "accelerate"):
        warnings.filterwarnings("ignore", category=FutureWarning, module=module)
        warnings.filterwarnings("ignore", category=UserWarning, module=module)
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=module)


def main(argv: list[str] | None = None) -> int:
    prepare_environment()
    _quiet_libraries()
    _register_more()
    ns = build_parser().parse_args(argv)
    _help, _args, handler = COMMANDS[ns.command]
    try:
        return handler(ns)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI prints one clear line, not a traceback
        from infra.errors import FlywheelError

        if isinstance(exc, FlywheelError | ValueError):
            print(f"flywheel {ns.command}: error: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
