"""A flow's docstring as the Prefect UI shows it: the deployment's Description tab renders it
as Markdown with HTML allowed, so ``gates/<version>/`` would show as ``gates//`` (``<version>``
read as a tag), and the ``Args:`` section, which the run form already shows field by field,
would be repeated there as one run-on paragraph. Both `prefect deploy` and
``python -m deployments.serve`` take the deployment's description from ``flow.description``,
which :func:`described` sets."""

from __future__ import annotations

import inspect
import re
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from prefect import Flow

F = TypeVar("F", bound="Flow[..., Any]")

# Google-style sections the run form shows elsewhere (Args) or that say nothing to an operator
_SECTIONS = re.compile(r"^(Args|Arguments|Returns|Yields|Raises|Example|Examples):\s*$")
# a code span: Markdown escapes what is inside it; RST's ``x`` is a Markdown span too
_CODE = re.compile(r"(``.+?``|`[^`]+`)", re.DOTALL)


def _escape(text: str) -> str:
    """``<`` and ``>`` as entities outside code spans (inside, Markdown escapes them)."""
    parts = _CODE.split(text)
    return "".join(
        part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;")
        for i, part in enumerate(parts)
    )


def ui_description(doc: str | None) -> str | None:
    """``doc`` (a flow's docstring) for the UI's Description tab: everything before its
    ``Args:`` / ``Returns:`` / ``Raises:`` sections, with no text read as HTML."""
    if not doc:
        return doc
    kept: list[str] = []
    for line in inspect.cleandoc(doc).splitlines():
        if _SECTIONS.match(line.strip()):
            break
        kept.append(line)
    return _escape("\n".join(kept).strip())


def described(flow: F) -> F:
    """``flow`` with its description fit for the UI (:func:`ui_description` of its
    docstring); put it above ``@flow``."""
    flow.description = ui_description(flow.description)
    return flow
