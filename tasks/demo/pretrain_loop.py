"""The pre-training loop of v0 (:func:`pretrain`: SFT until the dev target), on two processes
with exactly the result of one.

A pre-training step is two length buckets of questions, each a forward and backward whose
gradients add up (:func:`tasks.demo.pretrain.train_step`), on a model this small one busy
core each. :class:`PairedSteps` hands the second bucket to a helper process that holds the same
weights (shared memory): it computes that bucket's gradients while this process computes the
first's, then this process adds them (the same ``g1 + g2`` as autograd's accumulation), clips
and steps the optimiser, which updates the shared weights in place. A dev evaluation is split
the same way, by whole generation batches. Every number is computed as on one process, on one
thread each, so v0 is bit for bit the same model (its cache key does not change) in about 60 %
of the time. Without a second CPU, or when the helper cannot start or fails, each step is
computed here alone: slower, not different.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import random
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from infra.serving.causal_lm import warmup_cosine
from infra.serving.local_lm import LocalLM, intra_op_threads
from tasks.demo.pretrain import (
    NEAR_TARGET,
    PROGRESS_EVERY,
    BootstrapConfig,
    accuracy_by_workload,
    balance,
    chunk_backward,
    evaluate_golden,
    fresh_model,
    progress,
    step_batches,
)
from tasks.demo.workloads import CALCULATOR, sample_question

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from tasks.demo import domain

log = logging.getLogger(__name__)

# the helper's start (imports: seconds of CPU) pays off over this many steps; fewer (the tests'
# tiny configs) run on one process, with the same result
HELPER_MIN_STEPS = 100
REPLY_TIMEOUT_S = 600.0  # the first reply waits for the helper's imports (seconds, more if busy)


def _serve(conn: Connection, config: BootstrapConfig, seed: int, shared: dict[str, Any]) -> None:
    """The helper process: the same model on the shared weights; answers ``("step", ...)`` with
    the bucket's weighted loss (its gradients in the shared buffers) and ``("eval", ...)`` with
    the items' verifier scores, until ``None``."""
    import torch

    torch.set_num_threads(max(1, config.threads))
    tokenizer, model = fresh_model(config, seed)
    for name, param in model.named_parameters():
        param.data = shared["weights"][name]
    probe = LocalLM(model, tokenizer, path=Path("."), max_context=config.n_positions)
    while (message := conn.recv()) is not None:
        try:
            if message[0] == "step":
                _, ids, labels, n, size = message
                model.train()
                model.zero_grad(set_to_none=True)
                loss = chunk_backward(model, torch.tensor(ids), torch.tensor(labels), n, size)
                for name, param in model.named_parameters():
                    shared["grads"][name].copy_(param.grad)
                conn.send(("ok", loss))
            else:
                _, items, batch_size = message
                model.eval()
                conn.send(("ok", evaluate_golden(probe, items, batch_size=batch_size)[1]))
        except Exception as exc:  # noqa: BLE001 - the parent computes this part itself
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


def second_cpu() -> bool:
    """Whether this process may run on more than one CPU."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except AttributeError:  # not Linux
        return (os.cpu_count() or 1) > 1


class PairedSteps:
    """Pre-training steps and dev evaluations of ``model`` on this process and a helper (see
    module); with no helper, on this process alone, with the same result. A context manager:
    the helper starts on entry (``model``'s weights move to shared memory; create the optimiser
    after it) and ends on exit."""

    def __init__(self, model: Any, config: BootstrapConfig, seed: int, *, helper: bool = True):
        """``model`` as built by :func:`tasks.demo.pretrain.fresh_model` from ``config`` and
        ``seed`` (the helper builds its own so, then takes these weights); the caller runs
        with ``config.threads`` intra-op threads, as the helper does."""
        self.model = model
        self.config = config
        self.seed = seed
        self.want_helper = helper and second_cpu()
        self._conn: Connection | None = None
        self._proc: Any = None
        self._grads: dict[str, Any] = {}

    def __enter__(self) -> PairedSteps:
        if self.want_helper:
            try:
                self._start()
            except Exception as exc:  # noqa: BLE001 - one process is slower, not different
                log.warning("pre-training on one process: helper did not start (%s)", exc)
                self._stop()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()

    @property
    def paired(self) -> bool:
        """Whether a helper process takes half of each step."""
        return self._conn is not None

    def _start(self) -> None:
        import torch
        import torch.multiprocessing as mp

        self.model.share_memory()
        params = dict(self.model.named_parameters())
        weights = {name: p.data for name, p in params.items()}
        self._grads = {name: torch.zeros_like(p.data).share_memory_() for name, p in params.items()}
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        shared = {"weights": weights, "grads": self._grads}
        proc = ctx.Process(
            target=_serve,
            args=(child, self.config, self.seed, shared),
            name="flywheel-pretrain-helper",
            daemon=True,
        )
        main = sys.modules["__main__"]
        # spawn imports the caller's __main__ in the child (a script without a main guard would
        # run again there); the helper needs nothing of it
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            proc.start()
        finally:
            sys.modules["__main__"] = main
        child.close()
        self._conn, self._proc = parent, proc

    def _stop(self) -> None:
        conn, proc, self._conn, self._proc = self._conn, self._proc, None, None
        if conn is not None:
            with contextlib.suppress(OSError):
                conn.send(None)
            conn.close()
        if proc is not None:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)

    def _ask(self, message: tuple[Any, ...]) -> bool:
        """Send ``message`` to the helper; False (and on alone from now) when it cannot."""
        if self._conn is None:
            return False
        try:
            self._conn.send(message)
            return True
        except OSError as exc:
            self._fail(f"{type(exc).__name__}")
            return False

    def _answer(self) -> Any:
        """The helper's answer, or None (and on alone from now) when it has none."""
        if self._conn is None:
            return None
        try:
            if not self._conn.poll(REPLY_TIMEOUT_S):
                self._fail(f"no answer in {REPLY_TIMEOUT_S:.0f} s")
                return None
            status, value = self._conn.recv()
        except (OSError, EOFError) as exc:
            self._fail(type(exc).__name__)
            return None
        if status != "ok":
            self._fail(str(value))
            return None
        return value

    def _fail(self, why: str) -> None:
        log.warning("pre-training helper failed (%s): on one process from here", why)
        self._stop()

    def train_step(
        self,
        tokenizer: Any,
        opt: Any,
        rng: random.Random,
        size: int,
        *,
        hedge_share: float = 0.0,
        workloads: tuple[str, ...] = (CALCULATOR,),
        weights: list[float] | None = None,
    ) -> float:
        """:func:`tasks.demo.pretrain.train_step`, its second bucket on the helper."""
        import torch

        first, second = step_batches(
            tokenizer, rng, size, hedge_share=hedge_share, workloads=workloads, weights=weights
        )
        opt.zero_grad(set_to_none=True)
        ids, labels, n, total_size = second
        asked = self._ask(("step", ids.tolist(), labels.tolist(), n, total_size))
        total = chunk_backward(self.model, *first)
        theirs = self._answer() if asked else None
        if theirs is None:  # alone: autograd adds the second bucket's gradients the same way
            total += chunk_backward(self.model, *second)
        else:
            for name, param in self.model.named_parameters():
                if param.grad is None:
                    param.grad = self._grads[name].clone()
                else:
                    param.grad.add_(self._grads[name])
            total += theirs
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        opt.step()
        return total

    def evaluate(
        self, probe: LocalLM, items: list[domain.DomainItem], *, batch_size: int
    ) -> tuple[float, list[float]]:
        """:func:`tasks.demo.pretrain.evaluate_golden`, the later half of its batches on the
        helper (a batch is generated the same wherever it runs)."""
        batches = math.ceil(len(items) / batch_size)
        cut = min(len(items), (batches - batches // 2) * batch_size)
        asked = cut < len(items) and self._ask(("eval", items[cut:], batch_size))
        _, scores = evaluate_golden(probe, items[:cut], batch_size=batch_size)
        theirs = self._answer() if asked else None
        if theirs is None:
            _, theirs = evaluate_golden(probe, items[cut:], batch_size=batch_size)
        scores = scores + list(theirs)
        return (sum(scores) / len(scores) if scores else 0.0), scores


@dataclass
class PretrainLog:
    """Pre-training's losses, its dev-accuracy curve and whether it stopped at the target."""

    losses: list[float]
    curve: list[tuple[int, float]]  # (step, dev accuracy)
    stopped_early: bool
    processes: int = 1  # 2: a helper process took half of every step (the same result)


def pretrain(
    model: Any, tokenizer: Any, config: BootstrapConfig, seed: int, *, helper: bool | None = None
) -> PretrainLog:
    """SFT on random non-golden items until the dev accuracy reaches the target; with
    ``helper`` (default: from ``HELPER_MIN_STEPS`` steps on), on two processes where there are
    two CPUs (:class:`PairedSteps`: the same model, sooner)."""
    import torch

    if helper is None:
        helper = config.steps >= HELPER_MIN_STEPS

    rng = random.Random(seed)
    dev_rng = random.Random(seed + 1_000_003)
    dev = [sample_question(dev_rng, config.workloads) for _ in range(config.dev_items)]
    probe = LocalLM(model, tokenizer, path=Path("."), max_context=config.n_positions)
    threads = max(1, config.threads)  # the helper's too: a thread count changes the sums
    with intra_op_threads(threads), PairedSteps(model, config, seed, helper=helper) as pair:
        opt = torch.optim.AdamW(
            model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
        )

        schedule = warmup_cosine(config.warmup_steps, config.steps)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
        log_ = PretrainLog(losses=[], curve=[], stopped_early=False)
        log_.processes = 2 if pair.paired else 1
        doing = f"pre-train on the demo domain (until dev accuracy {config.target_accuracy:.0%})"
        every = config.eval_every
        weights: list[float] | None = None  # several workloads: the weaker gets more questions
        for step in range(1, config.steps + 1):
            if step % PROGRESS_EVERY == 1:
                progress(doing, config, done=step - 1)
            model.train()
            log_.losses.append(
                pair.train_step(
                    tokenizer,
                    opt,
                    rng,
                    config.batch_size,
                    hedge_share=config.hedge_share,
                    workloads=config.workloads,
                    weights=weights,
                )
            )
            sched.step()
            if step >= config.min_steps and step % every == 0:
                model.eval()
                accuracy, scores = pair.evaluate(probe, dev, batch_size=config.eval_batch_size)
                if len(config.workloads) > 1:
                    by = accuracy_by_workload(dev, scores)
                    accuracy, weights = min(by.values()), balance(by, config.workloads)
                    log.info("pre-training step %d: dev accuracy by workload %s", step, by)
                log_.curve.append((step, accuracy))
                log.info("pre-training step %d: dev accuracy %.3f", step, accuracy)
                if accuracy >= config.target_accuracy:
                    log_.stopped_early = step < config.steps
                    break
                if accuracy >= NEAR_TARGET * config.target_accuracy:
                    # the jump can pass the target within one interval (0.48 -> 0.69 in 25
                    # steps): look five times as often once close, so the base stays weak
                    every = max(1, config.eval_every // 5)
    model.eval()
    return log_
