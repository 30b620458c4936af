"""Plug-in verifiers (RLVR): any ``module:function`` (or an entry point of the group
``flywheel.verifiers``) that takes a :class:`VerifierTrace` and returns a score in 0..1,
``None`` when it cannot tell, or a mapping ``{"score": ..., "reference": ...}`` that also gives
context recall its reference. Sync or async functions both work.

Settings: ``FLYWHEEL_REWARD__VERIFIER=mypkg.checks:exact_json`` for every workload, or
``FLYWHEEL_REWARD__VERIFIERS='{"support": "mypkg.checks:exact_json"}'`` per workload (a
trace's ``workload``, ``"default"`` when it has none). Without either, the embedded demo's
calculator (``tasks.demo.verifier:calculator``) is the verifier, plugged in like any other.
A verifier function may carry a ``verifier_id`` attribute naming its version (part of every
cache key); else the id hashes its bytecode, so editing it invalidates its cache.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from infra.errors import ConfigError
from infra.traces.conversation import Messages, ToolCall

if TYPE_CHECKING:
    from infra.settings import RewardSettings

ENTRY_POINT_GROUP = "flywheel.verifiers"
DEFAULT_WORKLOAD = "default"
# the verifier when the settings name none: the embedded demo's, loaded by name like a user's
DEFAULT_VERIFIER = "tasks.demo.verifier:calculator"


@dataclass(frozen=True, kw_only=True)
class VerifierTrace:
    """What a verifier sees of a trace (or of a golden item's answer in the gate)."""

    question: str
    contexts: list[str]
    answer: str
    reference: str | None = None
    workload: str = DEFAULT_WORKLOAD
    trace_id: str | None = None
    messages: Messages = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    """A verifier's result: the score (``None``: cannot tell) and a reference, when it has one."""

    score: float | None
    reference: str | None = None


def load_verifier(spec: str) -> Callable[..., Any]:
    """The function ``spec`` names: ``module.path:function``, else an entry point name of the
    group ``flywheel.verifiers``.

    Raises:
        ConfigError: the module, function or entry point cannot be found (one line naming it).
    """
    return load_plugin(spec, group=ENTRY_POINT_GROUP, what="verifier")


def load_plugin(spec: str, *, group: str, what: str) -> Callable[..., Any]:
    """The function ``spec`` names: ``module.path:function``, else an entry point name of
    ``group``; ``what`` names the plug-in in errors.

    Raises:
        ConfigError: the module, function or entry point cannot be found (one line naming it).
    """
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigError(
                f"{what} {spec!r}: cannot import {module_name!r} ({exc.__class__.__name__}); "
                "is its package installed or on PYTHONPATH?"
            ) from None
        fn = getattr(module, attr, None)
    else:
        found = [ep for ep in entry_points(group=group) if ep.name == spec]
        if not found:
            raise ConfigError(
                f"{what} {spec!r}: no such entry point in group {group!r} "
                "(or write module.path:function)"
            )
        fn = found[0].load()
    if not callable(fn):
        raise ConfigError(f"{what} {spec!r}: not a function")
    return fn


def as_verdict(result: Any) -> Verdict:
    """A verifier's return value as a :class:`Verdict`.

    Raises:
        TypeError: not a number, None, bool or a mapping with ``score``.
    """
    if isinstance(result, Verdict):
        return result
    if isinstance(result, Mapping):
        score, reference = result.get("score"), result.get("reference")
        return Verdict(None if score is None else float(score), reference)
    if result is None:
        return Verdict(None)
    if isinstance(result, bool | int | float):
        return Verdict(float(result))
    raise TypeError(f"a verifier returns a number, None or a mapping, not {type(result).__name__}")


class PluginVerifier:
    """A plug-in verifier as a :class:`~tasks.reward.judges.Judge` (free and local: never
    skipped for feedback)."""

    kind = "verifier"
    costly = False

    def __init__(self, spec: str, fn: Callable[..., Any] | None = None) -> None:
        self.spec = spec
        self.fn = fn or load_verifier(spec)
        named = getattr(self.fn, "verifier_id", None)
        code = getattr(self.fn, "__code__", None)
        digest = hashlib.sha256(code.co_code if code is not None else b"").hexdigest()[:8]
        # the function's bytecode is part of the id: editing the verifier invalidates its cache
        self.config_id = str(named) if named else f"plugin:{spec}:{digest}"

    async def verify(self, trace: VerifierTrace) -> Verdict:
        """The verifier's verdict on ``trace`` (awaited when the function is async)."""
        result = self.fn(trace)
        if inspect.isawaitable(result):
            result = await result
        return as_verdict(result)

    async def judge(
        self, *, question: str, contexts: list[str], answer: str, reference: str | None
    ) -> float | None:
        """The verifier's score of ``answer`` (the Judge protocol)."""
        trace = VerifierTrace(
            question=question, contexts=list(contexts), answer=answer, reference=reference
        )
        return (await self.verify(trace)).score

    def reference_for(
        self,
        question: str,  # noqa: ARG002
        contexts: list[str],  # noqa: ARG002 - the scorer interface's
    ) -> str | None:
        """None: a plug-in gives its reference with the verdict."""
        return None


def verifier_spec(reward: RewardSettings, workload: str = DEFAULT_WORKLOAD) -> str:
    """The verifier of ``workload``: ``reward.verifiers[workload]``, else ``reward.verifier``,
    else the embedded default (:data:`DEFAULT_VERIFIER`)."""
    return reward.verifiers.get(workload) or reward.verifier or DEFAULT_VERIFIER


def verifier_for(reward: RewardSettings, workload: str = DEFAULT_WORKLOAD) -> PluginVerifier:
    """The loaded verifier of ``workload`` (see :func:`verifier_spec`).

    Raises:
        ConfigError: the verifier the settings name cannot be loaded.
    """
    return PluginVerifier(verifier_spec(reward, workload))
