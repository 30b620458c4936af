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
        COMMANDS[name] = (help_text, args or (lambda p: None), fn)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flywheel", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (help_text, add_args, _fn) in COMMANDS.items():
        add_args(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: list[str] | None = None) -> int:
    prepare_environment()
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
