"""Where ``flywheel prove`` gets its base model and the questions of its shared traffic, both
by name, so that the platform never imports the embedded demo:

- questions: the sampler ``FLYWHEEL_REWARD__QUESTIONS`` names (``module:function``, or an entry
  point of the group ``flywheel.questions``) that takes a :class:`random.Random` and returns a
  question string, or an object with ``question`` and ``contexts`` (tool results or passages);
  without the setting the demo's ``tasks.demo.domain:sample_question``;
- base model: a version registered in the store (``flywheel prove --base VERSION``), else v0
  as the demo's bootstrap (``tasks.demo.bootstrap:bootstrap_base_model``) builds it (cached).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from infra.serving import models
from tasks.reward.verifiers import load_plugin

if TYPE_CHECKING:
    from collections.abc import Callable

    from infra.settings import RewardSettings, Settings
    from infra.store import ObjectStore
    from tasks.prove.traffic import Question

QUESTIONS_ENTRY_POINT_GROUP = "flywheel.questions"
# the embedded demo's, loaded by name like a user's own
DEFAULT_QUESTIONS = "tasks.demo.domain:sample_question"
DEFAULT_BOOTSTRAP = "tasks.demo.bootstrap:bootstrap_base_model"


@dataclass(frozen=True)
class AskedQuestion:
    """A question a sampler gave as a plain string (no tool results or passages)."""

    question: str
    contexts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Base:
    """The model every arm starts from: its version and a local directory holding it."""

    version: str
    model_dir: Path


def question_sampler(reward: RewardSettings) -> Callable[[random.Random], Any]:
    """The sampler ``reward.questions`` names, else the demo's (:data:`DEFAULT_QUESTIONS`).

    Raises:
        ConfigError: the sampler cannot be loaded.
    """
    spec = reward.questions or DEFAULT_QUESTIONS
    return load_plugin(spec, group=QUESTIONS_ENTRY_POINT_GROUP, what="question sampler")


def sample_questions(reward: RewardSettings, n: int, *, seed: int) -> list[Question]:
    """``n`` questions from the settings' sampler, seeded.

    Raises:
        ConfigError: the sampler cannot be loaded.
        TypeError: the sampler returned neither a string nor an object with ``question``.
    """
    sample = question_sampler(reward)
    rng = random.Random(seed)
    return [_as_question(sample(rng)) for _ in range(n)]


def _as_question(item: Any) -> Question:
    if isinstance(item, str):
        return AskedQuestion(item)
    if not isinstance(getattr(item, "question", None), str):
        raise TypeError(
            f"a question sampler returns a string or an object with .question, "
            f"not {type(item).__name__}"
        )
    if not hasattr(item, "contexts"):
        return AskedQuestion(item.question)
    return item  # type: ignore[no-any-return]


def base_model(store: ObjectStore, *, settings: Settings, version: str | None, seed: int) -> Base:
    """``version`` fetched from the store, or (``None``) v0 from the demo's bootstrap, built
    with ``seed`` or taken from its cache.

    Raises:
        ObjectNotFound: ``version`` is not registered (or not complete) in the store.
    """
    if version is not None:
        model_dir = models.fetch_model(store, version, models.model_cache_root(settings))
        return Base(version=version, model_dir=model_dir)
    # a module:function spec never consults an entry-point group
    bootstrap = load_plugin(DEFAULT_BOOTSTRAP, group="", what="bootstrap")
    boot = bootstrap(store, settings=settings, seed=seed)
    return Base(version=boot.version, model_dir=boot.model_dir)
