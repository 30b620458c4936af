"""Golden sets: held-out items with a known right answer, on which the release gate, the
training run's evaluation and ``prove`` compare models.

A golden set is any JSONL file, or a folder of them, one item a line::

    {"item_id": "s1", "question": "Refund window?", "contexts": ["Refunds: 30 days"],
     "reference": "30 days", "slice": "billing", "workload": "support", "messages": [...]}

``item_id``, ``question`` and ``reference`` are required. ``messages`` is how the agent asks
the model (its final call, shaped as production traffic); without it the question is asked with
each context as a tool result. ``workload`` picks the verifier (``reward.verifiers``); other
keys are kept in ``extra`` for the domain that wrote them. Settings name the set:
``FLYWHEEL_REWARD__GOLDEN`` (default: the repository's ``golden/``), per workload
``FLYWHEEL_REWARD__GOLDEN_SETS='{"support": "/data/support.jsonl"}'``, else a folder named
after the workload inside the shared set's folder (``golden/support/``); a workload with
neither is evaluated on the shared set. Only a configured workload (``FLYWHEEL_WORKLOADS``)
has a set of its own: no path is built from any other name. A folder's ``MANIFEST``
(``sha256sum`` format) pins its files: a changed item fails :func:`verify_manifest`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.settings.workloads import configured_workload
from infra.traces.conversation import Messages, ToolCall, ToolCallFunction
from tasks.reward.verifiers import (
    DEFAULT_WORKLOAD,
    Verdict,
    VerifierTrace,
    load_plugin,
    verifier_for,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Sequence

    from infra.serving.local_lm import LocalLM
    from infra.settings import RewardSettings

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
MANIFEST = "MANIFEST"
MATCH_ENTRY_POINT_GROUP = "flywheel.golden_match"
# the matcher when the settings name none: the embedded demo's, loaded by name like a user's
DEFAULT_GOLDEN_MATCH = "tasks.demo.workloads:is_golden_question"
_FIELDS = ("item_id", "question", "contexts", "reference", "slice", "workload", "messages")


@dataclass(frozen=True)
class GoldenItem:
    """One golden item: a question, its contexts and the right answer (``reference``)."""

    item_id: str
    question: str
    contexts: list[str]
    reference: str
    slice: str = "all"
    workload: str = DEFAULT_WORKLOAD
    messages: Messages = field(default_factory=list, compare=False)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def prompt(self) -> Messages:
        """The agent's final call for this item: its ``messages``, else the question with each
        context as the result of a tool call."""
        if self.messages:
            return [m.copy() for m in self.messages]
        messages: Messages = [{"role": "user", "content": self.question}]
        for i, context in enumerate(self.contexts):
            tool: ToolCallFunction = {"name": "tool", "arguments": "{}"}
            call: ToolCall = {"id": f"call_{i}", "type": "function", "function": tool}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": context})
        return messages

    def to_json(self) -> dict[str, Any]:
        """The item as one JSONL line's object (``extra`` keys at the top level)."""
        data = {k: v for k, v in asdict(self).items() if k != "extra"}
        if not data["messages"]:
            del data["messages"]
        return {**self.extra, **data}

    @classmethod
    def from_json(cls, data: dict[str, Any], *, workload: str | None = None) -> GoldenItem:
        """An item from one line's object; ``workload`` when the line names none."""
        return cls(
            item_id=str(data["item_id"]),
            question=str(data["question"]),
            contexts=[str(c) for c in data.get("contexts") or []],
            reference=str(data["reference"]),
            slice=str(data.get("slice") or "all"),
            workload=str(data.get("workload") or workload or DEFAULT_WORKLOAD),
            messages=list(data.get("messages") or []),
            extra={k: v for k, v in data.items() if k not in _FIELDS},
        )


def own_golden_path(
    reward: RewardSettings, workload: str | None, *, workloads: Collection[str] = ()
) -> Path | None:
    """``workload``'s own golden set: ``reward.golden_sets[workload]``, else the folder named
    after it inside the shared set's folder (``golden/<workload>/``); None when it has none
    (no workload, or ``default`` without an entry in ``golden_sets``). ``workload`` must be
    ``default`` or one of the configured ``workloads`` (``FLYWHEEL_WORKLOADS``): no path is
    built from any other name.

    Raises:
        UnknownWorkload: ``workload`` is not configured.
    """
    if not workload:
        return None
    configured_workload(workload, workloads)
    if chosen := reward.golden_sets.get(workload):
        return Path(chosen).expanduser()
    shared = Path(reward.golden).expanduser() if reward.golden else GOLDEN_DIR
    folder = shared / workload
    return folder if workload != DEFAULT_WORKLOAD and folder.is_dir() else None


def golden_path(
    reward: RewardSettings, workload: str | None = None, *, workloads: Collection[str] = ()
) -> Path:
    """The golden set of ``workload`` (:func:`own_golden_path`), else the shared one
    (``reward.golden_sets["default"]``, else ``reward.golden``, else the repository's
    ``golden/``)."""
    if own := own_golden_path(reward, workload or DEFAULT_WORKLOAD, workloads=workloads):
        return own
    return Path(reward.golden).expanduser() if reward.golden else GOLDEN_DIR


def load_golden(path: str | Path | None = None, *, workload: str | None = None) -> list[GoldenItem]:
    """The items of a JSONL file or a folder of them (default: the repository's ``golden/``);
    ``workload`` for the lines that name none.

    Raises:
        ValueError: a line lacks question, reference or item_id, or item ids repeat.
    """
    path = Path(path or GOLDEN_DIR)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    items: list[GoldenItem] = []
    for file in files:
        for n, line in enumerate(file.read_text().splitlines(), start=1):
            if not line.strip():
                continue
            try:
                items.append(GoldenItem.from_json(json.loads(line), workload=workload))
            except (KeyError, ValueError, TypeError) as exc:
                raise ValueError(f"{file.name} line {n}: not a golden item ({exc})") from exc
    if len({i.item_id for i in items}) != len(items):
        raise ValueError(f"duplicate item_id in {path}")
    return items


def settings_golden(
    reward: RewardSettings, workload: str | None = None, *, workloads: Collection[str] = ()
) -> list[GoldenItem]:
    """The golden items the settings name for ``workload`` (one of the configured
    ``workloads``): its own set, whose lines naming no workload are ``workload``'s (scored by
    its verifier), else the shared set as it is (see :func:`golden_path`).

    Raises:
        UnknownWorkload: ``workload`` is not configured.
    """
    if (own := own_golden_path(reward, workload, workloads=workloads)) is not None:
        return load_golden(own, workload=workload)
    return load_golden(golden_path(reward))


def golden_version(path: str | Path | None = None) -> str:
    """The version of the golden set at ``path`` (a file or a folder of ``*.jsonl``; default:
    the repository's ``golden/``): ``g`` and the first 12 hex digits of the sha256 over each
    file's name and sha256. Content-addressed: the same items are the same version wherever
    they lie, and any change to any item is another version (a gate report names the version
    it was decided on)."""
    path = Path(path or GOLDEN_DIR)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    digest = hashlib.sha256("".join(f"{p.name}:{_sha256(p)}\n" for p in files).encode())
    return "g" + digest.hexdigest()[:12]


def settings_golden_set(
    reward: RewardSettings, workload: str | None = None, *, workloads: Collection[str] = ()
) -> tuple[list[GoldenItem], str]:
    """:func:`settings_golden` and the version of the set its items were read from (one
    set, read once: a gate never mixes versions)."""
    own = own_golden_path(reward, workload, workloads=workloads)
    path = own if own is not None else golden_path(reward)
    version = golden_version(path)
    items = load_golden(path, workload=workload) if own is not None else load_golden(path)
    if golden_version(path) != version:
        raise ValueError(f"the golden set {path} changed while it was read: read it again")
    return items, version


def golden_matcher(reward: RewardSettings) -> Callable[[str], bool]:
    """The domain's test that a question asks a golden item in other words
    (``reward.golden_match``; default: the embedded demo's, by each workload's golden cases)."""
    spec = reward.golden_match or DEFAULT_GOLDEN_MATCH
    return load_plugin(spec, group=MATCH_ENTRY_POINT_GROUP, what="golden matcher")


def verified_scores(
    items: Sequence[GoldenItem], answers: Sequence[str], *, reward: RewardSettings
) -> list[float | None]:
    """Each answer's score by its item's verifier (the workload's, see ``reward.verifiers``);
    ``None`` where the verifier cannot tell."""
    import asyncio

    from tasks.reward.scorer import run_sync

    verifiers = {w: verifier_for(reward, w) for w in sorted({it.workload for it in items})}

    async def all_verdicts() -> list[Verdict]:
        return list(
            await asyncio.gather(
                *(
                    verifiers[it.workload].verify(_trace(it, answer))
                    for it, answer in zip(items, answers, strict=True)
                )
            )
        )

    return [v.score for v in run_sync(all_verdicts())] if items else []


def _trace(item: GoldenItem, answer: str) -> VerifierTrace:
    return VerifierTrace(
        question=item.question,
        contexts=list(item.contexts),
        answer=answer,
        reference=item.reference,
        workload=item.workload,
        trace_id=item.item_id,
        messages=item.prompt(),
    )


def golden_accuracy(
    lm: LocalLM,
    items: Sequence[GoldenItem],
    *,
    reward: RewardSettings,
    batch_size: int = 100,
    max_new_tokens: int = 8,
) -> tuple[float, list[float]]:
    """Greedy accuracy of ``lm`` on ``items`` (each asked as :meth:`GoldenItem.prompt` says)
    and each item's verifier score (an item the verifier cannot tell counts 0)."""
    texts: list[str] = []
    for start in range(0, len(items), batch_size):
        chunk = items[start : start + batch_size]
        prompts = [lm.render(it.prompt()) for it in chunk]
        gens = lm.generate_batch(prompts, temperature=0.0, max_new_tokens=max_new_tokens)
        texts.extend(g.text for g in gens)
    scores = [s or 0.0 for s in verified_scores(items, texts, reward=reward)]
    return (sum(scores) / len(scores) if scores else 0.0), scores


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_manifest(golden_dir: Path = GOLDEN_DIR) -> Path:
    """Write ``MANIFEST`` (``sha256sum`` format) for every ``*.jsonl`` in ``golden_dir``."""
    files = sorted(golden_dir.glob("*.jsonl"))
    manifest = golden_dir / MANIFEST
    manifest.write_text("".join(f"{_sha256(p)}  {p.name}\n" for p in files))
    return manifest


def verify_manifest(golden_dir: Path | None = None) -> dict[str, str]:
    """Check every golden file against ``MANIFEST``; returns {file name: sha256}.

    Raises:
        ValueError: a file is missing, changed, or not listed in the manifest.
    """
    golden_dir = Path(golden_dir or GOLDEN_DIR)
    manifest = golden_dir / MANIFEST
    if not manifest.is_file():
        raise ValueError(f"no {MANIFEST} in {golden_dir}; run write_manifest() after review")
    listed: dict[str, str] = {}
    for line in manifest.read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            listed[name.strip().lstrip("*")] = digest
    present = {p.name for p in golden_dir.glob("*.jsonl")}
    if unlisted := present - listed.keys():
        raise ValueError(f"golden files not in {MANIFEST}: {sorted(unlisted)}")
    for name, digest in listed.items():
        path = golden_dir / name
        if not path.is_file():
            raise ValueError(f"golden file {name} listed in {MANIFEST} is missing")
        if _sha256(path) != digest:
            raise ValueError(f"golden file {name} does not match its {MANIFEST} hash")
    return listed
