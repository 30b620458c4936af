"""In-process causal LM serving: the embedded model server behind the gateway and the gate.

Any Hugging Face causal LM directory loads (``config.json``, safetensors, tokenizer files);
nothing is downloaded. Generation is serialised by a lock (one model, one forward at a time is
what two CPU cores can do anyway) and batched for the gate.

What the model sees. Real users write preambles full of personal data ("Hi, I'm Jane Roe,
card 4111 ... What is 23+58?") and the trace keeps that full message, but a 0.8 M-parameter
character model trained on such prompts collapses (it cannot find the question). So
:func:`render_prompt` renders only the *question sentence* of the last user message in the
demo format ``"Q: <question>\\nA:"``, and :meth:`LocalLM.generate` additionally left-truncates a
prompt to the context window (keeping its end, as small-context servers do). Tool results
(the calculator context) are recorded in the trace as contexts, not shown to the tiny model:
it would learn to copy them and leave the loop nothing to improve. A model with a chat
template (``base_model_path``) gets the full conversation through :meth:`LocalLM.render`.

Question sentence: split the message into sentences (after ``.``, ``!``, ``?`` or a newline
followed by whitespace); take the last sentence that ends with ``?``, else the last sentence.
A question that is not the last sentence and has no ``?`` is therefore not found.

Logprobs are the model's own (temperature-1, unprocessed) log-probabilities of the chosen
tokens, as vLLM reports them by default, so the gate can compute KL between versions.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from infra.errors import ConfigError
from infra.serving.causal_lm import Device, is_adapter, load_causal_lm, placement
from infra.traces.conversation import Message, Messages

log = logging.getLogger(__name__)

PROMPT_FORMAT = "Q: {question}\nA:"
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class RowParams:
    """What one request of a :meth:`LocalLM.generate_rows` batch asked for: temperature 0 is
    greedy; ``seed`` None draws a fresh seed from torch's global generator (so
    ``torch.manual_seed`` still makes a run reproducible)."""

    temperature: float = 0.0
    top_p: float = 1.0
    max_new_tokens: int = 16
    seed: int | None = None


@dataclass
class Generation:
    """One completion: text (stripped; one line for demo-format prompts), token counts,
    per-token logprobs of the generated tokens (EOS included)."""

    text: str
    tokens_in: int
    tokens_out: int
    logprobs: list[float] = field(default_factory=list)
    finish_reason: str = "stop"  # "stop" (end of answer) or "length" (max_new_tokens reached)
    compute_s: float | None = None  # this row's share of its batch's generation time
    batch_size: int | None = None  # the rows generated together with it (itself included)


def message_text(message: Message) -> str:
    """The text of an OpenAI chat message (string content or a list of text parts)."""
    content = message.get("content") or ""
    if isinstance(content, list):
        return " ".join(
            str(p.get("text", ""))
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        )
    return str(content)


def extract_question(text: str) -> str:
    """The question sentence of a user message (see the module docstring for the rule)."""
    sentences = [s.strip() for s in _SENTENCE_END.split(text.strip()) if s and s.strip()]
    if not sentences:
        return ""
    questions = [s for s in sentences if s.endswith("?")]
    return " ".join((questions or sentences)[-1].split())


def render_prompt(messages: Messages) -> str:
    """OpenAI chat messages -> the embedded model's prompt: the last user question only."""
    users = [m for m in messages if m.get("role") == "user"]
    text = message_text(users[-1]) if users else (message_text(messages[-1]) if messages else "")
    return PROMPT_FORMAT.format(question=extract_question(text))


@contextmanager
def intra_op_threads(n: int | None) -> Iterator[None]:
    """Run the block with torch using ``n`` intra-op threads, restoring the previous count after
    (None: unchanged).

    torch's thread count is process-wide, so the blocks active at once (generation in worker
    threads, training) are kept in one list: the newest still active decides, and the count
    from before the first one comes back when the last ends, whatever order they end in (two
    threads saving and restoring it on their own could leave torch at 1 thread for training).
    """
    import torch

    if n is None:
        yield
        return
    token = object()
    with _THREADS_LOCK:
        if not _THREADS_ACTIVE:
            _THREADS_OUTER[0] = torch.get_num_threads()
        _THREADS_ACTIVE.append((token, n))
        if torch.get_num_threads() != n:
            torch.set_num_threads(n)
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_ACTIVE[:] = [entry for entry in _THREADS_ACTIVE if entry[0] is not token]
            want = _THREADS_ACTIVE[-1][1] if _THREADS_ACTIVE else _THREADS_OUTER[0]
            if want and torch.get_num_threads() != want:
                torch.set_num_threads(want)


_THREADS_LOCK = threading.Lock()
_THREADS_ACTIVE: list[tuple[object, int]] = []  # (block, threads) of the blocks active now
_THREADS_OUTER = [0]  # the count before the first active block


class LocalLM:
    """A causal LM loaded in process; ``generate`` is thread-safe."""

    def __init__(
        self, model: Any, tokenizer: Any, *, path: Path, max_context: int, threads: int | None = 1
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.path = path
        self.max_context = max_context
        self.threads = threads
        self._lock = threading.Lock()
        # one intra-op thread on the CPU: the generating thread does all the work, so its CPU
        # time is the compute (unmoved by other processes on the machine); else wall time
        on_cpu = str(getattr(model, "device", "cpu")) == "cpu"
        self._compute_clock = time.thread_time if threads == 1 and on_cpu else time.perf_counter

    def compute_time(self) -> float:
        """A clock of this model's compute: the calling thread's CPU time where one intra-op
        thread on the CPU does all the work (other processes' load does not move it), else
        wall time. Only differences mean anything."""
        return self._compute_clock()

    @classmethod
    def load(
        cls,
        path: str | Path,
        *,
        threads: int | None = 1,
        device: Device = "auto",
        base_dir: str | Path | None = None,
    ) -> LocalLM:
        """Load a Hugging Face causal LM directory, or a LoRA adapter version on its base
        (``base_dir``, default: the base version fetched beside it), in eval mode on the
        device and dtype :func:`infra.serving.causal_lm.placement` picks for ``device``.

        ``threads``: torch intra-op threads while generating (``None``: leave torch's
        setting). One by default: for a small model more threads only add OpenMP
        synchronisation and make each answer slower. Set more for a large ``base_model_path``
        model.

        Raises:
            ConfigError: the directory is missing or is not a loadable causal LM.
        """
        path = Path(path).expanduser().resolve()
        if not (path / "config.json").is_file() and not is_adapter(path):
            raise ConfigError(
                f"no model at {path} (expected a Hugging Face model directory with config.json); "
                "run `flywheel bootstrap` or set FLYWHEEL_BASE_MODEL_PATH to a local model"
            )
        from transformers import AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a service log, not a terminal
        try:
            tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load the tokenizer at {path}: {exc}") from exc
        model = load_causal_lm(path, where=placement(device), base_dir=base_dir)
        model.eval()
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        cfg = model.config
        max_context = int(
            getattr(cfg, "n_positions", None)
            or getattr(cfg, "max_position_embeddings", None)
            or min(int(tokenizer.model_max_length), 4096)
        )
        log.info("loaded causal LM from %s (%d-token context)", path, max_context)
        return cls(model, tokenizer, path=path, max_context=max_context, threads=threads)

    @property
    def num_parameters(self) -> int:
        """The model's total parameter count."""
        return int(sum(p.numel() for p in self.model.parameters()))

    def render(self, messages: Messages) -> str:
        """The prompt for ``messages``: the tokenizer's chat template if it has one, else
        :func:`render_prompt` (the embedded demo format)."""
        if getattr(self.tokenizer, "chat_template", None):
            return str(
                self.tokenizer.apply_chat_template(
                    messages, tokenize=False, add_generation_prompt=True
                )
            )
        return render_prompt(messages)

    def generate(
        self,
        prompt: str,
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 16,
        seed: int | None = None,
    ) -> Generation:
        """One completion; temperature 0 is greedy."""
        return self.generate_batch(
            [prompt],
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            seed=seed,
        )[0]

    def generate_batch(
        self,
        prompts: list[str],
        *,
        temperature: float = 0.0,
        top_p: float = 1.0,
        max_new_tokens: int = 16,
        seed: int | None = None,
    ) -> list[Generation]:
        """Completions for several prompts in one left-padded batch (the gate's fast path), all
        with the same parameters (``seed`` seeds torch's global generator)."""
        if not prompts:
            return []
        import torch

        max_new = max(1, min(max_new_tokens, self.max_context - 1))
        ids = self._encode(prompts, self.max_context - max_new)
        kwargs: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            kwargs = {"do_sample": True, "temperature": temperature, "top_p": top_p, "top_k": 0}
        with self._lock, intra_op_threads(self.threads), torch.inference_mode():
            if seed is not None:
                torch.manual_seed(seed)
            return self._run(prompts, ids, [max_new] * len(prompts), **kwargs)

    def generate_rows(self, prompts: list[str], rows: list[RowParams]) -> list[Generation]:
        """Completions for several prompts, each with its own temperature, top-p, token budget
        and seed (:mod:`infra.serving.local_sampling`): a row gets the same answer as when generated
        alone. Rows whose prompt and budget would not fit the context together run in more
        than one batch."""
        import torch
        from transformers import LogitsProcessorList

        from infra.serving.local_sampling import RowSampler

        budgets = [max(1, min(r.max_new_tokens, self.max_context - 1)) for r in rows]
        ids = [
            self._encode([p], self.max_context - b)[0]
            for p, b in zip(prompts, budgets, strict=True)
        ]
        out: list[Generation] = []
        with self._lock, intra_op_threads(self.threads), torch.inference_mode():
            for group in _fitting_groups(ids, budgets, self.max_context):
                sampler = RowSampler(
                    [replace(rows[i], max_new_tokens=budgets[i]) for i in group],
                    prompt_width=max(len(ids[i]) for i in group),
                    eos_token_id=self.tokenizer.eos_token_id,
                )
                started = self._compute_clock()  # the lock is held: no queueing counted
                gens = self._run(
                    [prompts[i] for i in group],
                    [ids[i] for i in group],
                    [budgets[i] for i in group],
                    do_sample=False,
                    logits_processor=LogitsProcessorList([sampler]),
                )
                share = (self._compute_clock() - started) / max(1, len(gens))
                for gen in gens:  # the measured cost of serving each row (infra.metrics.cost)
                    gen.compute_s, gen.batch_size = share, len(gens)
                out += gens
        return out

    def _encode(self, prompts: list[str], budget: int) -> list[list[int]]:
        """Each prompt's token ids, left-truncated to ``budget`` tokens."""
        tok = self.tokenizer
        return [tok(p, add_special_tokens=False)["input_ids"][-budget:] for p in prompts]

    def _run(
        self, prompts: list[str], ids: list[list[int]], budgets: list[int], **kwargs: Any
    ) -> list[Generation]:
        """One left-padded ``generate`` call (the caller holds the lock); row ``i``'s tokens
        cut to ``budgets[i]``."""
        import torch

        tok = self.tokenizer
        width = max(len(x) for x in ids)
        pad = tok.pad_token_id
        device = self.model.device
        input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids], device=device)
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids], device=device)
        out = self.model.generate(
            input_ids=input_ids,
            attention_mask=mask,
            max_new_tokens=max(budgets),
            pad_token_id=pad,
            eos_token_id=tok.eos_token_id,
            return_dict_in_generate=True,
            output_logits=True,
            **kwargs,
        )
        new = out.sequences[:, width:].cpu()
        logp = torch.stack(out.logits, dim=1).float().log_softmax(-1).cpu() if out.logits else None
        return [
            self._decode(
                new[row, : budgets[row]].tolist(),
                logp[row] if logp is not None else None,
                tokens_in=len(ids[row]),
                one_line=prompts[row].endswith(PROMPT_FORMAT.split("{question}")[1]),
            )
            for row in range(len(prompts))
        ]

    def _decode(
        self, tokens: list[int], logp: Any, *, tokens_in: int, one_line: bool
    ) -> Generation:
        eos = self.tokenizer.eos_token_id
        finish = "length"
        if eos in tokens:
            tokens = tokens[: tokens.index(eos) + 1]
            finish = "stop"
        text = self.tokenizer.decode(tokens, skip_special_tokens=True)
        if one_line and "\n" in text.strip():  # a demo-format answer is one line; then a new turn
            text = text.strip().split("\n", 1)[0]
            finish = "stop"
        logprobs = [float(logp[i, t]) for i, t in enumerate(tokens)] if logp is not None else []
        return Generation(
            text=text.strip(),
            tokens_in=tokens_in,
            tokens_out=len(tokens),
            logprobs=logprobs,
            finish_reason=finish,
        )


def _fitting_groups(ids: list[list[int]], budgets: list[int], max_context: int) -> list[list[int]]:
    """Row indices in consecutive groups whose longest prompt plus largest budget fits the
    context (a padded row's positions run to the batch's width plus its longest budget)."""
    groups: list[list[int]] = []
    width = budget = 0
    for i, (row, own) in enumerate(zip(ids, budgets, strict=True)):
        if groups and max(width, len(row)) + max(budget, own) <= max_context:
            groups[-1].append(i)
            width, budget = max(width, len(row)), max(budget, own)
        else:
            groups.append([i])
            width, budget = len(row), own
    return groups
