"""How every ``flywheel`` command answers: a summary on stdout (aligned ``key  value`` text, or
one JSON object with the global ``--json``), and at most one line on stderr for an error
(``flywheel <cmd>: error: ...``) with exit status 2 for bad input and 1 for a failed run."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

BAD_INPUT = 2
FAILED = 1


def emit(ns: argparse.Namespace, title: str, fields: Mapping[str, object]) -> None:
    """Print a command's summary: ``title`` then one aligned ``key  value`` line per field, or
    (``--json``) the fields as one JSON object with ``command`` first."""
    if getattr(ns, "json", False):
        print(json.dumps({"command": ns.command, **fields}, default=_jsonable))
    else:
        print(render(title, fields))


def render(title: str, fields: Mapping[str, object]) -> str:
    """``title`` and the fields as aligned ``key  value`` lines (underscores read as spaces)."""
    names = {key: key.replace("_", " ") for key in fields}
    width = max((len(n) for n in names.values()), default=0)
    lines = [title] + [f"  {names[k]:<{width}}  {text(v)}" for k, v in fields.items()]
    return "\n".join(lines)


def text(value: Any) -> str:
    """A value as a person reads it in a summary line."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {text(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list | tuple | set):
        return ", ".join(text(v) for v in value) or "-"
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, set):
        return sorted(value)
    return str(value)


# ------------------------------------------------------------------------------ errors


def error(command: str, message: str) -> None:
    """The one line an error gets (newlines folded: it stays one line)."""
    prog = f"flywheel {command}" if command else "flywheel"
    print(f"{prog}: error: {' '.join(message.split())}", file=sys.stderr)


def is_bad_input(exc: BaseException) -> bool:
    """A setting or an argument the operator can fix (exit 2), as opposed to a failed run."""
    from infra.errors import ConfigError, ControlRefused

    if isinstance(exc, ConfigError | ControlRefused | ValueError):
        return True
    prefect_exceptions = sys.modules.get("prefect.exceptions")
    bad_parameters = getattr(prefect_exceptions, "ParameterTypeError", None)
    return bad_parameters is not None and isinstance(exc, bad_parameters)


def describe(exc: BaseException) -> str:
    """What went wrong in a line: flywheel's own errors carry a message written for people;
    anything else is named by its type, with where to find the details."""
    from infra.errors import FlywheelError

    message = " ".join(str(exc).split())
    if isinstance(exc, FlywheelError | ValueError) and message:
        return message
    name = type(exc).__name__
    hint = "run with --debug (or see the flow run's logs in the Prefect UI) for the traceback"
    return f"{name}: {message} ({hint})" if message else f"{name} ({hint})"
