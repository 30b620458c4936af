"""Training a student: SFT on the accepted answers, each rendered exactly as served (the
teacher's chat template or the demo prompt, from :func:`tasks.train.pairs.prompt_renderer`),
plus token-level distillation: on every answer token the KL divergence from the teacher's
next-token distribution to the student's, both softened by ``temperature`` (Hinton et al.;
scaled by ``temperature**2`` so its gradient keeps the SFT term's size). The teacher runs in
process beside the student, read only. With a vocabulary of its own the student cannot be
compared token by token and learns from the answers alone (``kd_weight`` 0)."""

from __future__ import annotations

import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.serving.causal_lm import warmup_cosine

if TYPE_CHECKING:
    from collections.abc import Sequence

    from infra.settings import DistilSettings, StudentProfile
    from tasks.train.rows import SftRow


@dataclass(frozen=True)
class DistilConfig:
    """How a student is trained (from ``FLYWHEEL_DISTIL__*``)."""

    steps: int = 1000
    batch_size: int = 32
    learning_rate: float = 2e-3
    warmup_steps: int = 20
    kd_weight: float = 0.2
    temperature: float = 2.0
    seed: int = 0
    threads: int | None = None

    @classmethod
    def from_settings(cls, s: DistilSettings, *, steps: int | None = None) -> DistilConfig:
        """The settings' configuration, ``steps`` when given."""
        return cls(
            steps=steps or s.steps,
            batch_size=s.batch_size,
            learning_rate=s.learning_rate,
            warmup_steps=s.warmup_steps,
            kd_weight=s.kd_weight,
            temperature=s.temperature,
            seed=s.seed,
            threads=s.threads,
        )

    def hyperparameters(self) -> dict[str, Any]:
        """The lineage's record (a student is a whole model: ``use_lora`` False, so the
        next preference tuning of the demo trains it whole, as its teacher was)."""
        return {**asdict(self), "method": "distil", "use_lora": False}


@dataclass(kw_only=True)
class DistilOutcome:
    """A trained student: where it is, its losses, sizes and cost of training."""

    output_dir: Path
    metrics: dict[str, float]
    teacher_parameters: int
    student_parameters: int
    token_level: bool  # KL on the teacher's logits was part of the loss
    hardware: str
    wall_s: float
    losses: list[float] = field(default_factory=list)


def _rows(tok: Any, examples: Sequence[SftRow]) -> list[tuple[list[int], list[int]]]:
    """(ids, labels) of each example: prompt masked out of the loss, EOS closing the answer."""
    out = []
    for ex in examples:
        p = tok(ex["prompt"], add_special_tokens=False)["input_ids"]
        c = tok(ex["completion"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        out.append((p + c, [-100] * len(p) + c))
    return out


def _pad(rows: list[tuple[list[int], list[int]]], pad: int) -> tuple[Any, Any]:
    """Right-padded tensors (a causal model needs no mask: no real token sees a later pad)."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([r + [pad] * (width - len(r)) for r, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    return ids, labels


def kd_loss(student_logits: Any, teacher_logits: Any, labels: Any, temperature: float) -> Any:
    """Mean over answer tokens of KL(teacher || student) at ``temperature``, times its square."""
    import torch.nn.functional as F  # noqa: N812 - torch's own name

    mask = labels[:, 1:] != -100
    s = student_logits[:, :-1][mask] / temperature
    t = teacher_logits[:, :-1][mask] / temperature
    kl = F.kl_div(
        F.log_softmax(s, -1), F.log_softmax(t, -1), log_target=True, reduction="batchmean"
    )
    return kl * temperature**2


def distil_model(
    teacher: Any,
    teacher_tok: Any,
    out_dir: Path,
    *,
    examples: Sequence[SftRow],
    profile: StudentProfile,
    config: DistilConfig,
    device: str = "cpu",
) -> DistilOutcome:
    """Build the student of ``profile`` and train it on ``examples`` (``prompt`` as served,
    ``completion`` the accepted answer) against ``teacher``; saved to ``out_dir``."""
    from infra.serving.local_lm import intra_op_threads
    from tasks.distil.student import build_student
    from tasks.train.trainer import hardware

    started = time.perf_counter()
    texts = [ex["prompt"] + ex["completion"] for ex in examples]
    with intra_op_threads(config.threads):
        student, tok = build_student(teacher, teacher_tok, profile, texts=texts, seed=config.seed)
        student.to(device)
        teacher.eval()
        token_level = profile.share_vocab and config.kd_weight > 0
        rows = _rows(tok, examples)
        losses = _train(student, teacher, tok, rows, config, token_level=token_level)
        student.eval()
        out_dir.mkdir(parents=True, exist_ok=True)
        student.save_pretrained(out_dir, safe_serialization=True)
        tok.save_pretrained(out_dir)
        hw = hardware()
    tail = losses[-20:] or [math.nan]
    return DistilOutcome(
        output_dir=out_dir,
        metrics={"loss": sum(tail) / len(tail), "steps": float(len(losses))},
        teacher_parameters=sum(p.numel() for p in teacher.parameters()),
        student_parameters=sum(p.numel() for p in student.parameters()),
        token_level=token_level,
        hardware=hw,
        wall_s=time.perf_counter() - started,
        losses=losses,
    )


def _train(
    student: Any,
    teacher: Any,
    tok: Any,
    rows: list[tuple[list[int], list[int]]],
    config: DistilConfig,
    *,
    token_level: bool,
) -> list[float]:
    """AdamW steps on random batches of ``rows``; the loss of each step."""
    import torch

    rng = random.Random(config.seed)
    opt = torch.optim.AdamW(student.parameters(), lr=config.learning_rate, weight_decay=0.01)

    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(config.warmup_steps, config.steps))
    device = next(student.parameters()).device
    weight = config.kd_weight if token_level else 0.0
    losses: list[float] = []
    student.train()
    for _ in range(config.steps):
        batch = [rows[rng.randrange(len(rows))] for _ in range(config.batch_size)]
        ids, labels = (t.to(device) for t in _pad(batch, tok.eos_token_id))
        out = student(input_ids=ids, labels=labels)
        loss = out.loss
        if weight > 0:
            with torch.no_grad():
                teacher_logits = teacher(input_ids=ids).logits.float()
            kd = kd_loss(out.logits.float(), teacher_logits, labels, config.temperature)
            loss = (1 - weight) * loss + weight * kd
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return losses
