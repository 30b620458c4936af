"""Stage 4 data: preference pairs (and RFT/GRPO examples) from ``flywheel.training_examples``.

One read, pinned to a snapshot: the table's current snapshot id is taken first and every scan
uses it, so the rows a model trained on are exactly ``scan(snapshot_id=...)`` restricted to
the trace ids recorded in its lineage, however the table changes afterwards.

Selection, in order (each drop is counted):

1. rolling buffer: only examples created in the last ``buffer_days`` days (per workload:
   ``workload_buffer_days`` overrides it for a named workload; ``0`` means no limit), and
   when ``buffer_windows > 0`` only the newest that many hour windows - older samples came
   from older policies (stale, off-policy);
2. consent: rows of users whose latest consent row says no are dropped, even if curate ran
   before they withdrew;
3. decontamination: golden questions are never trained on: a question is contaminated when
   the domain's matcher (``reward.golden_match``; the demo's: golden operands, any order or
   phrasing) says so, or when its normalised question sentence (placeholders such as ``<PERSON>`` removed, case,
   spacing, punctuation and leading zeros ignored) is, or ends with, that of a golden item
   ("Hello <PERSON>, who wrote Hamlet?" is a near-duplicate of "Who wrote Hamlet?");
4. pairs per group of siblings, keyed by (workload, prompt group, rendered conversation):
   chosen = best reward among rows eligible as ``train``, rejected = worst reward in the
   group (``rejected_only`` rows included), kept when ``chosen - rejected >= min_margin`` and
   the two answers differ. Ties break on trace id (deterministic).

A pair's prompt is the conversation up to the answer (the example's ``messages``: system
prompt, earlier turns, tool calls and tool results) rendered exactly as the serving model
sees it (``render``: :func:`prompt_renderer` of the model directory, its chat template; the
demo model without one gets :func:`infra.serving.local_lm.render_prompt`, the last user question).
Only the final assistant turn is the completion, so earlier assistant turns and tool outputs
sit in the prompt and are masked out of the loss. Old rows without messages render their
question as the one user turn. A completion is the answer joined to the prompt with one
space unless the prompt already ends in whitespace (the demo format ``"Q: ...\\nA:"`` was
pre-trained on ``" <answer>"``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import task

from infra.serving.local_lm import extract_question, render_prompt
from infra.task_retries import IO_RETRIES
from infra.traces.conversation import DEFAULT_WORKLOAD, Messages
from tasks.datasets import WORKLOAD, BufferedExample, PreferencePair
from tasks.golden import GoldenItem, golden_matcher, own_golden_path, settings_golden
from tasks.train.buffer import BufferScope, read_examples
from tasks.train.rows import PromptRow, SelectedPair, SftRow

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from infra.settings import RewardSettings

Render = Callable[[Messages], str]
_PLACEHOLDER = re.compile(r"<[A-Z][A-Z0-9_]*>")
_NON_WORD = re.compile(r"[^0-9a-z]+")
_NUMBER = re.compile(r"\d+")


def demo_render(messages: Messages | str) -> str:
    """The embedded model's prompt for a conversation (or one user message): what the gateway
    serves, the last user question only."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    return render_prompt(messages)


def prompt_renderer(model_dir: str | Path) -> Render:
    """How the served model sees a conversation (a list of OpenAI chat messages): its chat
    template if it has one (tool calls and tool results included), else the demo prompt
    (mirrors :meth:`infra.serving.local_lm.LocalLM.render`, without loading the weights)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    if not getattr(tok, "chat_template", None):
        return demo_render
    return ChatRender(tok)


class ChatRender:
    """A tokenizer's chat template over the messages, with the generation prompt; the answer
    follows it directly (``separator``: see :func:`completion_text`)."""

    separator = ""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def __call__(self, messages: Messages) -> str:
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True
        )
        return str(text)


def example_messages(row: BufferedExample) -> Messages:
    """The conversation up to the answer of a training_examples row (an old row without
    messages: its question as the one user turn)."""
    raw = row.get("messages")
    if raw:
        messages = json.loads(raw) if isinstance(raw, str) else raw
        if isinstance(messages, list) and messages:
            return messages
    return [{"role": "user", "content": row.get("question") or ""}]


def completion_text(prompt: str, answer: str, *, separator: str | None = None) -> str:
    """The answer as the completion that follows ``prompt``: joined with ``separator``; by
    default one space unless the prompt already ends in whitespace (the demo format's ``A:``
    was pre-trained on ``" <answer>"``). A chat template's renderer (:class:`ChatRender`)
    says ``""``: its generation prompt ends in the assistant header (``<|assistant|>``) and
    the model was pre-trained, and is served, with the answer right after it."""
    answer = answer.strip()
    if separator is not None:
        return f"{separator}{answer}"
    return answer if not prompt or prompt[-1].isspace() else f" {answer}"


def normalize_question(text: str) -> str:
    """The question sentence with placeholders, case, spacing, punctuation and leading zeros
    removed: two phrasings that differ only in those are near-duplicates."""
    sentence = extract_question(_PLACEHOLDER.sub(" ", text or ""))
    words = _NON_WORD.sub(" ", sentence.lower()).split()
    return " ".join(_NUMBER.sub(lambda m: str(int(m.group())), w) for w in words)


class GoldenFilter:
    """Tells whether a question is a golden item or a near-duplicate of one; ``same_as_golden``
    (the domain's ``reward.golden_match``) also catches a golden item in other words."""

    def __init__(
        self,
        golden: Iterable[GoldenItem],
        same_as_golden: Callable[[str], bool] | None = None,
    ) -> None:
        self.normalised = {normalize_question(item.question) for item in golden}
        self.same_as_golden = same_as_golden

    @classmethod
    def from_settings(
        cls, reward: RewardSettings, workload: str | None = None, *, workloads: Collection[str] = ()
    ) -> GoldenFilter:
        """The filter of the golden set and matcher the reward settings name; with
        ``workload`` (one of the configured ``workloads``, else :class:`UnknownWorkload`), its
        own golden set too (:func:`~tasks.golden.own_golden_path`)."""
        golden = settings_golden(reward)
        if workload is not None and own_golden_path(reward, workload, workloads=workloads):
            golden += settings_golden(reward, workload, workloads=workloads)
        return cls(golden, golden_matcher(reward))

    def __call__(self, question: str) -> bool:
        """True when ``question`` must not be trained on."""
        if self.same_as_golden is not None and self.same_as_golden(question):
            return True
        words = normalize_question(question).split()  # a golden question ending the sentence
        return any(" ".join(words[i:]) in self.normalised for i in range(len(words)))


@dataclass(kw_only=True)
class Selection:
    """What stage 4 will train on, and how it was chosen (counts only, no text)."""

    pairs: list[SelectedPair]  # train_run filled by write_pairs
    sft: list[SftRow]  # high-reward singles
    prompts: list[PromptRow]  # one per group
    snapshot_id: int | None  # training_examples snapshot read
    windows: list[str]  # the buffer
    counts: dict[str, int] = field(default_factory=dict)
    pair_trace_ids: list[str] = field(default_factory=list)  # rows behind the pairs
    reward_config_hashes: list[str] = field(default_factory=list)
    workload: str | None = None  # the one workload whose rows these are (None: every workload)


def _best(rows: list[BufferedExample]) -> BufferedExample:
    return min(rows, key=lambda r: (-float(r["reward"]), r["trace_id"]))


def _worst(rows: list[BufferedExample]) -> BufferedExample:
    return min(rows, key=lambda r: (float(r["reward"]), r["trace_id"]))


def pair_id(chosen_trace: str, rejected_trace: str) -> str:
    """Deterministic: the same two rows always make the same pair id."""
    return hashlib.sha256(f"{chosen_trace}\x00{rejected_trace}".encode()).hexdigest()[:24]


def select(
    rows: Sequence[BufferedExample],
    *,
    min_margin: float,
    contaminated: Callable[[str], bool],
    opted_out: set[str] | None = None,
    render: Render = demo_render,
    snapshot_id: int | None = None,
    windows: list[str] | None = None,
) -> Selection:
    """Pairs, RFT singles and GRPO prompts from the buffer's rows (see the module docstring):
    :class:`~tasks.datasets.BufferedExample` rows, or rows with at least its columns."""
    separator = getattr(render, "separator", None)  # a chat template's: "" (completion_text)
    counts: Counter[str] = Counter(read=len(rows))
    opted_out = opted_out or set()
    groups: dict[tuple[str, str, str], list[BufferedExample]] = defaultdict(list)
    for row in rows:
        if row.get("reward") is None or not row.get("answer"):
            counts["dropped_unscored"] += 1
        elif row.get("user_key") and row["user_key"] in opted_out:
            counts["dropped_opted_out"] += 1
        elif contaminated(row["question"] or ""):
            counts["decontaminated"] += 1
        else:
            prompt = render(example_messages(row))
            workload = row.get(WORKLOAD) or DEFAULT_WORKLOAD
            groups[(workload, row["prompt_group"], prompt)].append(row)
    now = datetime.now(UTC)
    pairs: list[SelectedPair] = []
    sft: list[SftRow] = []
    prompts: list[PromptRow] = []
    used: set[str] = set()
    for key in sorted(groups):
        members = groups[key]
        group, prompt = key[1], key[2]
        train = [r for r in members if r.get("eligible_as") == "train"]
        best = _best(train) if train else None
        prompts.append(_prompt_row(prompt, best or members[0]))
        if best is None:
            counts["groups_without_train"] += 1
            continue
        sft.append(_sft_row(prompt, best, separator=separator))
        worst = _worst(members)
        margin = float(best["reward"]) - float(worst["reward"])
        if margin < min_margin:
            counts["groups_below_margin"] += 1
            continue
        if best["answer"].strip() == worst["answer"].strip():
            counts["groups_same_answer"] += 1
            continue
        pairs.append(
            _pair_row(
                group=group,
                prompt=prompt,
                best=best,
                worst=worst,
                margin=margin,
                now=now,
                separator=separator,
            )
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


def _sft_row(prompt: str, best: BufferedExample, *, separator: str | None) -> SftRow:
    return SftRow(
        prompt=prompt,
        completion=completion_text(prompt, best["answer"], separator=separator),
        trace_id=best["trace_id"],
        user_key=best.get("user_key"),
        reward_config_hash=best.get("reward_config_hash"),
    )


def _prompt_row(prompt: str, row: BufferedExample) -> PromptRow:
    return PromptRow(
        prompt=prompt,
        question=row["question"],
        contexts=list(row.get("contexts") or []),
        trace_id=row["trace_id"],
        user_key=row.get("user_key"),
        workload=row.get(WORKLOAD),
    )


def _pair_row(
    *,
    group: str,
    prompt: str,
    best: BufferedExample,
    worst: BufferedExample,
    margin: float,
    now: datetime,
    separator: str | None,
) -> SelectedPair:
    return SelectedPair(
        pair_id=pair_id(best["trace_id"], worst["trace_id"]),
        prompt_group=group,
        prompt=prompt,
        chosen=completion_text(prompt, best["answer"], separator=separator),
        rejected=completion_text(prompt, worst["answer"], separator=separator),
        chosen_reward=float(best["reward"]),
        rejected_reward=float(worst["reward"]),
        reward_diff=margin,
        windows=sorted({best["window"], worst["window"]}),
        user_keys=sorted({k for k in (best.get("user_key"), worst.get("user_key")) if k}),
        train_run=None,
        created_at=now,
        _trace_ids=[best["trace_id"], worst["trace_id"]],  # not a column: lineage only
    )


def write_pairs(
    catalog: Catalog,
    *,
    train_run: str,
    pairs: Sequence[PreferencePair],
    published_runs: list[str] | None = None,
) -> int | None:
    """Replace the pairs of ``train_run`` (and, given ``published_runs``, of every run that
    published nothing: a crashed run leaves no pairs) in one commit; returns its snapshot id."""
    from pyiceberg.expressions import EqualTo, NotIn, Or

    from infra.catalog import current_snapshot_id, replace_where

    rows: list[PreferencePair] = [{**p, "train_run": train_run} for p in pairs]
    row_filter: Any = EqualTo("train_run", train_run)
    if published_runs is not None:
        row_filter = Or(row_filter, NotIn("train_run", published_runs or [""]))  # [""]: none
    replace_where(catalog, "preference_pairs", row_filter, rows)
    return current_snapshot_id(catalog, "preference_pairs")


def select_training_data(
    catalog: Catalog,
    *,
    scope: BufferScope = BufferScope(),
    min_margin: float,
    render: Render = demo_render,
    contaminated: Callable[[str], bool],
    human_override: bool = True,
    consent_mode: str = "opt_in",
) -> Selection:
    """Read the buffer (its rows in ``scope``) at one snapshot and select pairs, singles and
    prompts from it; a trace a person labelled trains with the human score as its reward
    (``human_override``); users excluded by consent now, per ``consent_mode``, are dropped
    even if curate kept them; ``scope.workload``: that workload's rows only (None: every
    workload's; ``scope.workloads``: the configured ones, see
    :func:`~tasks.train.buffer.workload_of`)."""
    from tasks.datasets import training_exclusions

    workload = scope.workload
    rows, sid, windows = read_examples(
        catalog,
        scope.buffer_windows,
        buffer_days=scope.buffer_days,
        workload_days=scope.workload_days,
        served_by=scope.served_by,
        workload=workload,
        workloads=scope.workloads,
    )
    if human_override:
        from tasks.review import override_rewards

        override_rewards(catalog, rows)
    selection = select(
        rows,
        min_margin=min_margin,
        contaminated=contaminated,
        opted_out=training_exclusions(catalog, mode=consent_mode),
        render=render,
        snapshot_id=sid,
        windows=windows,
    )
    selection.workload = workload
    return selection


@task(**IO_RETRIES)
def write_pairs_task(
    catalog: Catalog,
    *,
    train_run: str,
    pairs: Sequence[PreferencePair],
    published_runs: list[str] | None = None,
) -> int | None:
    """Returns the preference_pairs snapshot id holding this run's pairs."""
    return write_pairs(catalog, train_run=train_run, pairs=pairs, published_runs=published_runs)
