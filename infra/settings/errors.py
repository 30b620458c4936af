"""One-line descriptions of a malformed setting, naming the environment variable
(``FLYWHEEL_GATEWAY__PORT: ...``) instead of pydantic's multi-line report of a field path.

Values are echoed only when short and not secret-looking, so a mistyped key never reaches a
terminal or a log."""

from __future__ import annotations

import json
import os
import re
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

PREFIX = "FLYWHEEL_"
NESTED = "__"
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "SALT")
_FIELD_IN_SETTINGS_ERROR = re.compile(r'field "([^"]+)"')


def variable_name(loc: tuple[int | str, ...]) -> str:
    """``("gateway", "port")`` -> ``FLYWHEEL_GATEWAY__PORT`` (an alias is returned as is)."""
    parts = [str(p) for p in loc]
    if parts and parts[0].isupper():  # a validation alias such as AWS_ACCESS_KEY_ID
        return parts[0]
    return PREFIX + NESTED.join(parts).upper()


def _shown(name: str, value: object) -> str:
    if not isinstance(value, str | int | float) or any(w in name for w in _SECRET_WORDS):
        return ""
    text = str(value)
    return f" (got {text!r})" if len(text) <= 60 else ""


def describe_validation_error(exc: ValidationError) -> str:
    """Every invalid variable with what is wrong, in one line."""
    parts = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ")
        if not err["loc"]:  # a check across settings: its message names the variables
            parts.append(msg)
            continue
        name = variable_name(err["loc"])
        parts.append(f"{name}: {msg}{_shown(name, err.get('input'))}")
    return "; ".join(parts)


def describe_settings_error(exc: Exception, model: type[BaseModel]) -> str:
    """A list, mapping or section variable whose value is not JSON: name it.

    pydantic-settings only says which top-level field failed (``error parsing value for field
    "curate"``); this finds the variables of that field in the environment and ``.env`` whose
    target is a list, mapping or model and whose value does not parse."""
    match = _FIELD_IN_SETTINGS_ERROR.search(str(exc))
    field = match.group(1) if match else ""
    culprits = []
    for name, value in _variables(field).items():
        kind = _complex_kind(_annotation(model, name))
        if kind and not _is_json(value):
            example = {"list": '["a", "b"]', "mapping": '{"key": "value"}'}.get(
                kind, '{"name": value}'
            )
            culprits.append(
                f"{name}: a {kind} setting is written as JSON, e.g. {example}{_shown(name, value)}"
            )
    if culprits:
        return "; ".join(culprits)
    var = PREFIX + field.upper() if field else "a FLYWHEEL_ variable"
    return f"{var}: cannot parse the value (lists and mappings are written as JSON)"


def _variables(field: str) -> dict[str, str]:
    """Variables that set ``field`` (or one of its sub-settings), from ``.env`` and the
    environment (the environment wins, as in pydantic-settings)."""
    found: dict[str, str] = {}
    dotenv = Path(".env")
    if dotenv.is_file():
        from dotenv import dotenv_values

        found.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
    found.update(os.environ)
    head = (PREFIX + field).upper()
    return {k.upper(): v for k, v in found.items() if k.upper().split(NESTED)[0] == head}


def _annotation(model: type[BaseModel], name: str) -> Any:
    annotation: Any = model
    for part in name.removeprefix(PREFIX).lower().split(NESTED.lower()):
        fields = getattr(annotation, "model_fields", None)
        if not fields or part not in fields:
            return None
        annotation = fields[part].annotation
    return annotation


def _complex_kind(annotation: Any) -> str | None:
    """``list``, ``mapping`` or ``section`` (a nested model) when the value must be JSON."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return "list"
    if origin is dict:
        return "mapping"
    kinds = [_complex_kind(a) for a in typing.get_args(annotation)]
    return next((k for k in kinds if k), None)


def _is_json(value: str) -> bool:
    try:
        json.loads(value)
    except ValueError:
        return False
    return True
