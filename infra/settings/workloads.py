"""The workloads setting (``FLYWHEEL_WORKLOADS``): the agents or use cases with release lines of
their own, part of :class:`infra.settings.Settings`.

Workloads are configured, never taken from traffic. A request, a trace or a curated row naming
any other workload is the shared release's (``default``, :func:`served_workload`); a workload
an operator names (``--workload W``, a flow parameter) must be one of them
(:func:`configured_workload`). So only configured names ever become a release line, a golden-set
folder, a flow run name or a metric label, and a client cannot name a path or grow a series.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from infra.errors import UnknownWorkload

if TYPE_CHECKING:
    from collections.abc import Collection

# the JSON-schema form (Prefect's run form); ``_NAME`` is matched whole, since ``$`` would
# also accept a final newline
WORKLOAD_PATTERN = "^[a-z0-9][a-z0-9_-]{0,63}$"
_NAME = re.compile("[a-z0-9][a-z0-9_-]{0,63}")
# the shared release's workload, as infra.traces.conversation names it (importing that package
# here would load every trace adapter with the settings)
DEFAULT_WORKLOAD = "default"
_RULE = "lower-case letters, digits, '_' and '-', at most 64, starting with a letter or digit"


def is_workload_name(name: object) -> bool:
    """Whether ``name`` is shaped like a workload name (configured or not)."""
    return isinstance(name, str) and _NAME.fullmatch(name) is not None


def check_workload_names(names: list[str]) -> list[str]:
    """``names`` when every one is a workload name, ``default`` not among them, none twice.

    Raises:
        ValueError: the first name that breaks a rule, and the rule.
    """
    for name in names:
        if not is_workload_name(name):
            raise ValueError(f"{_shown(name)} is not a workload name ({_RULE})")
        if name == DEFAULT_WORKLOAD:
            raise ValueError("'default' is the shared release, not a workload: leave it out")
    if len(set(names)) != len(names):
        raise ValueError("a workload is listed twice")
    return names


def served_workload(name: str | None, workloads: Collection[str]) -> str:
    """The workload whose release serves (and whose rows hold) traffic naming ``name``:
    ``name`` when it is configured, else ``default``, the shared release."""
    return name if name and name in workloads else DEFAULT_WORKLOAD


def configured_workload(name: str | None, workloads: Collection[str]) -> str | None:
    """``name`` as an operator gave it, checked: None (no workload named) and ``default`` (the
    shared release) as they are, else one of ``workloads``.

    Raises:
        UnknownWorkload: ``name`` is not configured; the message lists the configured ones.
    """
    if name is None or name == DEFAULT_WORKLOAD or name in workloads:
        return name
    known = ", ".join(sorted(workloads)) or "none"
    raise UnknownWorkload(
        f"workload {_shown(name)} is not configured (FLYWHEEL_WORKLOADS lists: {known})"
    )


def _shown(name: object) -> str:
    """``name`` quoted, cut short: it may be anything a person typed."""
    text = repr(name)
    return text if len(text) <= 70 else text[:66] + "...'"
