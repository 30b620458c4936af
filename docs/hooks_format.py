"""The Markdown formatting the generated reference pages share (:mod:`hooks`): the generated
header, reST inline markup as Markdown, table cells and inline code."""

from __future__ import annotations

import inspect
import re
from typing import Any

HEADER = "<!-- generated at build time by docs/hooks.py from the code: edit the code -->\n\n"


def rst_to_md(text: str) -> str:
    """A docstring's reST inline markup as Markdown: ``x`` and :role:`x` become `x`."""
    text = re.sub(r":(?:class|func|meth|mod|attr|data|obj):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def cell(text: str) -> str:
    """Text for one Markdown table cell."""
    return " ".join(text.split()).replace("|", "\\|")


def code(text: str) -> str:
    """``text`` as inline code in a table cell (backticks inside widen the fence)."""
    text = cell(text)
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def docstring(obj: Any) -> str:
    """An object's docstring, cleaned, its reST inline markup as Markdown."""
    return rst_to_md(inspect.cleandoc(obj.__doc__ or ""))
