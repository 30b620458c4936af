"""Stage 4 data: preference pairs (and RFT/GRPO examples) from ``flywheel.training_examples``.

One read, pinned to a snapshot: the table's current snapshot id is taken first and every scan
uses it, so the rows a model trained on are exactly ``scan(snapshot_id=...)`` restricted to
the trace ids recorded in its lineage, however the table changes afterwards.

Selection, in order (each drop is counted):

1. rolling buffer: only the last ``buffer_windows`` windows (ISO names sort by time; ``0``
   means every window) - older samples came from older policies (stale, off-policy);
2. consent: rows of users whose latest consent row says no are dropped, even if curate ran
   before they withdrew;
3. decontamination: golden questions are never trained on: a question is contaminated when
   :func:`tasks.domain.is_golden_question` says so (golden operands, any order or phrasing) or
   when its normalised question sentence (placeholders such as ``<PERSON>`` removed, case,
   spacing, punctuation and leading zeros ignored) is, or ends with, that of a golden item
   ("Hello <PERSON>, who wrote Hamlet?" is a near-duplicate of "Who wrote Hamlet?");
4. pairs per prompt group: chosen = best reward among rows eligible as ``train``, rejected =
   worst reward in the group (``rejected_only`` rows included), kept when ``chosen - rejected
   >= min_margin`` and the two answers differ. Ties break on trace id (deterministic).

Prompts are rendered exactly as the serving model sees them (``render``, default
:func:`infra.local_lm.render_prompt`); a completion is the answer joined to the prompt with
one space unless the prompt already ends in whitespace (the demo format ``"Q: ...\\nA:"``
was pre-trained on ``" <answer>"``).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.local_lm import extract_question, render_prompt
from infra.retries import IO_RETRIES
from tasks import domain

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

Render = Callable[[str], str]
_PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*>")
_NON_WORD = re.compile(r"[^0-9a-z]+")
_NUMBER = re.compile(r"\d+")
EXAMPLE_COLUMNS = (
    "trace_id",
    "prompt_group",
    "user_key",
    "question",
    "contexts",
    "answer",
    "reward",
    "reward_config_hash",
    "eligible_as",
    "window",
    "created_at",
)


def demo_render(question: str) -> str:
    """The embedded model's prompt for a user message (what the gateway serves)."""
    return render_prompt([{"role": "user", "content": question}])


def prompt_renderer(model_dir: str | Path) -> Callable[[str], str]:
    """How the served model sees a question: its chat template if it has one, else the demo
    prompt (mirrors :meth:`infra.local_lm.LocalLM.render`, without loading the weights)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    if not getattr(tok, "chat_template", None):
        return demo_render

    def render(question: str) -> str:
        messages = [{"role": "user", "content": question}]
        return str(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))

    return render


def completion_text(prompt: str, answer: str) -> str:
    """The answer as the completion that follows ``prompt``."""
    answer = answer.strip()
    return answer if not prompt or prompt[-1].isspace() else f" {answer}"


def normalize_question(text: str) -> str:
    """The question sentence with placeholders, case, spacing, punctuation and leading zeros
    removed: two phrasings that differ only in those are near-duplicates."""
    sentence = extract_question(_PLACEHOLDER.sub(" ", text or ""))
    words = _NON_WORD.sub(" ", sentence.lower()).split()
    return " ".join(_NUMBER.sub(lambda m: str(int(m.group())), w) for w in words)


class GoldenFilter:
    """Tells whether a question is a golden item or a near-duplicate of one."""

    def __init__(self, golden: Iterable[domain.DomainItem]) -> None:
        self.normalised = {normalize_question(item.question) for item in golden}

    @classmethod
    def from_repo(cls) -> GoldenFilter:
        return cls(domain.load_golden())

    def __call__(self, question: str) -> bool:
        if domain.is_golden_question(question):
            return True
        words = normalize_question(question).split()  # a golden question ending the sentence
        return any(" ".join(words[i:]) in self.normalised for i in range(len(words)))


@dataclass(kw_only=True)
class Selection:
    """What stage 4 will train on, and how it was chosen (counts only, no text)."""

    pairs: list[dict[str, Any]]  # preference_pairs rows (train_run filled by write_pairs)
    sft: list[dict[str, Any]]  # {"prompt", "completion", "trace_id", ...}: high-reward singles
    prompts: list[dict[str, Any]]  # {"prompt", "question", "contexts", "trace_id"}: one per group
    snapshot_id: int | None  # training_examples snapshot read
    windows: list[str]  # the buffer
    counts: dict[str, int] = field(default_factory=dict)
    pair_trace_ids: list[str] = field(default_factory=list)  # rows behind the pairs
    reward_config_hashes: list[str] = field(default_factory=list)


def buffer_of(windows: Iterable[str], k: int) -> list[str]:
    """The last ``k`` distinct windows (all when ``k <= 0``), oldest first."""
    ordered = sorted({w for w in windows if w})
    return ordered if k <= 0 else ordered[-k:]


def read_examples(
    catalog: Catalog, buffer_windows: int
) -> tuple[list[dict[str, Any]], int | None, list[str]]:
    """Rows of the buffer windows at the table's current snapshot: (rows, snapshot id, windows)."""
    from pyiceberg.expressions import In

    from infra.catalog import get_table

    table = get_table(catalog, "training_examples")
    snap = table.current_snapshot()
    if snap is None:
        return [], None, []
    sid = snap.snapshot_id
    names = table.scan(selected_fields=("window",), snapshot_id=sid).to_arrow()
    windows = buffer_of(names.column("window").to_pylist(), buffer_windows)
    if not windows:
        return [], sid, []
    data = table.scan(
        row_filter=In("window", windows), selected_fields=EXAMPLE_COLUMNS, snapshot_id=sid
    ).to_arrow()
    return data.to_pylist(), sid, windows


def _best(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return min(rows, key=lambda r: (-float(r["reward"]), r["trace_id"]))


def _worst(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return min(rows, key=lambda r: (float(r["reward"]), r["trace_id"]))


def pair_id(chosen_trace: str, rejected_trace: str) -> str:
    """Deterministic: the same two rows always make the same pair id."""
    return hashlib.sha256(f"{chosen_trace}\x00{rejected_trace}".encode()).hexdigest()[:24]


def select(
    rows: list[dict[str, Any]],
    *,
    min_margin: float,
    contaminated: Callable[[str], bool],
    opted_out: set[str] | None = None,
    render: Render = demo_render,
    snapshot_id: int | None = None,
    windows: list[str] | None = None,
) -> Selection:
    """Pairs, RFT singles and GRPO prompts from the buffer's rows (see the module docstring)."""
    counts: Counter[str] = Counter(read=len(rows))
    opted_out = opted_out or set()
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("reward") is None or not row.get("answer"):
            counts["dropped_unscored"] += 1
        elif row.get("user_key") and row["user_key"] in opted_out:
            counts["dropped_opted_out"] += 1
        elif contaminated(row["question"] or ""):
            counts["decontaminated"] += 1
        else:
            groups[row["prompt_group"]].append(row)
    now = datetime.now(UTC)
    pairs: list[dict[str, Any]] = []
    sft: list[dict[str, Any]] = []
    prompts: list[dict[str, Any]] = []
    used: set[str] = set()
    for group in sorted(groups):
        members = groups[group]
        train = [r for r in members if r.get("eligible_as") == "train"]
        best = _best(train) if train else None
        prompt = render((best or members[0])["question"])
        prompts.append(_prompt_row(prompt, best or members[0]))
        if best is None:
            counts["groups_without_train"] += 1
            continue
        sft.append(_sft_row(prompt, best))
        worst = _worst(members)
        margin = float(best["reward"]) - float(worst["reward"])
        if margin < min_margin:
            counts["groups_below_margin"] += 1
            continue
        if best["answer"].strip() == worst["answer"].strip():
            counts["groups_same_answer"] += 1
            continue
        pairs.append(
            _pair_row(group=group, prompt=prompt, best=best, worst=worst, margin=margin, now=now)
        )
        used |= {best["trace_id"], worst["trace_id"]}
    counts.update(groups=len(groups), pairs=len(pairs), sft=len(sft), prompts=len(prompts))
    hashes = {r.get("reward_config_hash") for g in groups.values() for r in g}
    return Selection(
        pairs=pairs,
        sft=sft,
        prompts=prompts,
        snapshot_id=snapshot_id,
        windows=list(windows or []),
        counts=dict(counts),
        pair_trace_ids=sorted(used),
        reward_config_hashes=sorted(h for h in hashes if h),
    )


def _sft_row(prompt: str, best: dict[str, Any]) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "completion": completion_text(prompt, best["answer"]),
        "trace_id": best["trace_id"],
        "user_key": best.get("user_key"),
        "reward_config_hash": best.get("reward_config_hash"),
    }


def _prompt_row(prompt: str, row: dict[str, Any]) -> dict[str, Any]:
    return {
        "prompt": prompt,
        "question": row["question"],
        "contexts": list(row.get("contexts") or []),
        "trace_id": row["trace_id"],
        "user_key": row.get("user_key"),
    }


def _pair_row(
    *,
    group: str,
    prompt: str,
    best: dict[str, Any],
    worst: dict[str, Any],
    margin: float,
    now: datetime,
) -> dict[str, Any]:
    return {
        "pair_id": pair_id(best["trace_id"], worst["trace_id"]),
        "prompt_group": group,
        "prompt": prompt,
        "chosen": completion_text(prompt, best["answer"]),
        "rejected": completion_text(prompt, worst["answer"]),
        "chosen_reward": float(best["reward"]),
        "rejected_reward": float(worst["reward"]),
        "reward_diff": margin,
        "windows": sorted({best["window"], worst["window"]}),
        "user_keys": sorted({k for k in (best.get("user_key"), worst.get("user_key")) if k}),
        "train_run": None,
        "created_at": now,
        "_trace_ids": [best["trace_id"], worst["trace_id"]],  # not a column: lineage only
    }


def write_pairs(catalog: Catalog, *, train_run: str, pairs: list[dict[str, Any]]) -> int | None:
    """Replace the pairs of ``train_run`` in ``preference_pairs`` (one commit; a rerun never
    duplicates); returns the table's snapshot id after the commit."""
    from pyiceberg.expressions import EqualTo

    from infra.catalog import current_snapshot_id, replace_where

    rows = [{**p, "train_run": train_run} for p in pairs]
    replace_where(catalog, "preference_pairs", EqualTo("train_run", train_run), rows)
    return current_snapshot_id(catalog, "preference_pairs")


def select_training_data(
    catalog: Catalog,
    *,
    buffer_windows: int,
    min_margin: float,
    render: Render = demo_render,
    contaminated: Callable[[str], bool] | None = None,
    consent_mode: str = "opt_in",
) -> Selection:
    """Read the buffer at one snapshot and select pairs, singles and prompts from it (users
    excluded by consent now, per ``consent_mode``, are dropped even if curate kept them)."""
    from tasks.datasets import training_exclusions

    rows, sid, windows = read_examples(catalog, buffer_windows)
    return select(
        rows,
        min_margin=min_margin,
        contaminated=contaminated or GoldenFilter.from_repo(),
        opted_out=training_exclusions(catalog, mode=consent_mode),
        render=render,
        snapshot_id=sid,
        windows=windows,
    )


@task(**IO_RETRIES)
def select_task(
    catalog: Catalog,
    *,
    buffer_windows: int,
    min_margin: float,
    render: Render = demo_render,
    consent_mode: str = "opt_in",
) -> Selection:
    """Returns the pairs, singles and prompts of the rolling buffer (pinned to one snapshot)."""
    return select_training_data(
        catalog,
        buffer_windows=buffer_windows,
        min_margin=min_margin,
        render=render,
        consent_mode=consent_mode,
    )


@task(**IO_RETRIES)
def write_pairs_task(
    catalog: Catalog, *, train_run: str, pairs: list[dict[str, Any]]
) -> int | None:
    """Returns the preference_pairs snapshot id holding this run's pairs."""
    return write_pairs(catalog, train_run=train_run, pairs=pairs)
