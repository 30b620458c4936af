"""A student model of a student profile: the teacher's architecture family (GPT-2, Llama, or any
Hugging Face causal LM whose config names its layers, width and heads the GPT-2 or Llama way)
at the profile's smaller shape, with the teacher's tokenizer (shared vocabulary: token-level
distillation applies) or one of its own trained on the training texts.

``init: teacher`` copies the teacher's embeddings and evenly spaced layers into the student,
each tensor cut to the student's shape (the first rows and columns): a head start that
training then corrects, as layer-dropping distillation does (DistilBERT's initialisation)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from infra.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Iterable

    from infra.settings import StudentProfile

# the config attributes of a shape, by architecture family
_SHAPE_KEYS = {
    "gpt2": {"n_layer": "n_layer", "n_embd": "n_embd", "n_head": "n_head", "n_inner": "n_inner"},
    "llama": {
        "n_layer": "num_hidden_layers",
        "n_embd": "hidden_size",
        "n_head": "num_attention_heads",
        "n_inner": "intermediate_size",
    },
}
_LAYER = re.compile(r"\.(h|layers)\.(\d+)\.")


def shape_keys(model_type: str) -> dict[str, str]:
    """The config attribute naming each profile field for ``model_type``.

    Raises:
        ConfigError: an architecture whose shape this module does not know.
    """
    keys = _SHAPE_KEYS.get("llama" if model_type in ("llama", "mistral", "qwen2") else model_type)
    if keys is None:
        raise ConfigError(
            f"cannot shape a student of a {model_type!r} teacher (GPT-2 or Llama-style only)"
        )
    return keys


def student_config(teacher_config: Any, profile: StudentProfile, *, vocab_size: int) -> Any:
    """The teacher's config at the profile's shape (and ``vocab_size``)."""
    cfg = teacher_config.__class__.from_dict(teacher_config.to_dict())
    keys = shape_keys(cfg.model_type)
    for field, attr in keys.items():
        value = getattr(profile, field)
        if value is None and field == "n_inner":
            value = None if cfg.model_type == "gpt2" else 2 * profile.n_embd
        setattr(cfg, attr, value)
    if keys["n_head"] == "num_attention_heads":
        cfg.num_key_value_heads = profile.n_head
        cfg.head_dim = profile.n_embd // profile.n_head
    cfg.vocab_size = vocab_size
    return cfg


def parameter_count(config: Any) -> int:
    """Parameters of a model of ``config`` (built on the meta device: no memory, no time)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def own_tokenizer(teacher_tok: Any, texts: Iterable[str], vocab_size: int) -> Any:
    """A tokenizer of ``vocab_size`` tokens trained on ``texts`` the way the teacher's was (its
    pre-tokeniser, special tokens and chat template kept)."""
    tok = teacher_tok.train_new_from_iterator(texts, vocab_size=vocab_size)
    tok.chat_template = getattr(teacher_tok, "chat_template", None)
    tok.padding_side = teacher_tok.padding_side
    return tok


def build_student(
    teacher: Any, teacher_tok: Any, profile: StudentProfile, *, texts: list[str], seed: int
) -> tuple[Any, Any]:
    """(student model, its tokenizer) for ``profile`` from the loaded ``teacher``."""
    import torch
    from transformers import AutoModelForCausalLM

    tok = teacher_tok
    if not profile.share_vocab:
        assert profile.vocab_size is not None  # the profile's validator
        tok = own_tokenizer(teacher_tok, texts, profile.vocab_size)
    cfg = student_config(teacher.config, profile, vocab_size=len(tok))
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(cfg, name, getattr(tok, name, None))
    torch.manual_seed(seed)
    student = AutoModelForCausalLM.from_config(cfg)
    student.generation_config = teacher.generation_config
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        setattr(student.generation_config, name, getattr(tok, name, None))
    if getattr(teacher, "loss_type", None):
        student.loss_type = teacher.loss_type
    if profile.init == "teacher":
        init_from_teacher(student, teacher, same_vocab=profile.share_vocab)
    return student, tok


def layer_map(teacher_layers: int, student_layers: int) -> list[int]:
    """The teacher layer each student layer starts from: evenly spaced, first and last kept."""
    if student_layers == 1:
        return [teacher_layers - 1]
    step = (teacher_layers - 1) / (student_layers - 1)
    return [round(i * step) for i in range(student_layers)]


def init_from_teacher(student: Any, teacher: Any, *, same_vocab: bool) -> int:
    """Copy the teacher's tensors into the student (see the module docstring); returns how
    many were copied. Embeddings and the output head are copied only with a shared vocabulary."""
    import torch

    keys = shape_keys(student.config.model_type)
    mapping = layer_map(
        getattr(teacher.config, keys["n_layer"]), getattr(student.config, keys["n_layer"])
    )
    source = teacher.state_dict()
    copied = 0
    with torch.no_grad():
        for name, param in student.state_dict().items():
            match = _LAYER.search(name)
            if (
                match is None
                and not same_vocab
                and any(k in name for k in ("wte", "embed", "lm_head"))
            ):
                continue
            if match is not None:
                i = int(match.group(2))
                name = (
                    f"{name[: match.start()]}.{match.group(1)}.{mapping[i]}.{name[match.end() :]}"
                )
            theirs = source.get(name)
            if theirs is None or theirs.dim() != param.dim():
                continue
            cut = theirs[tuple(slice(0, n) for n in param.shape)]
            if cut.shape != param.shape:  # the student is larger here: keep its own values
                continue
            param.copy_(cut)
            copied += 1
    return copied
