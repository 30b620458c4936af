"""Per-row sampling for a batch of in-process generations with different parameters.

``transformers``' ``generate`` samples a whole batch with one temperature, one top-p and the
global random generator, so requests batched together would change each other's answers.
:class:`RowSampler` is a logits processor that decides every row's next token itself: a
sampled row applies its own temperature and top-p and draws from its own ``torch.Generator``
(seeded from the request's seed), a greedy row keeps its scores, and a row past its own token
budget is made to end; everything but the chosen token is masked, so ``generate`` run greedy
picks exactly that token. A seeded request therefore gets the same tokens whether it is
generated alone or batched with others: its draws come from its generator alone, one per step.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch
from transformers import LogitsProcessor, TemperatureLogitsWarper, TopPLogitsWarper


class RowParams(Protocol):
    """What a row asked for (:class:`infra.serving.local_lm.RowParams`, which imports this
    module)."""

    @property
    def temperature(self) -> float:
        """0: greedy"""

    @property
    def top_p(self) -> float:
        """the nucleus kept when sampling"""

    @property
    def max_new_tokens(self) -> int:
        """the row's own token budget"""

    @property
    def seed(self) -> int | None:
        """its random generator's seed (None: drawn from torch's)"""


def row_generator(row: RowParams) -> torch.Generator | None:
    """The random generator of a sampled row (None for a greedy one)."""
    if row.temperature <= 0:
        return None
    seed = row.seed if row.seed is not None else int(torch.randint(0, 2**62, (1,)).item())
    return torch.Generator().manual_seed(seed)


class RowSampler(LogitsProcessor):
    """Chooses each row's next token by its own :class:`RowParams` (see the module docstring).

    ``prompt_width``: the padded prompt length (the step is the sequence length past it);
    ``eos_token_id``: what a row past its ``max_new_tokens`` is made to emit, so the batch stops
    as soon as every row is done (the caller cuts that token off)."""

    def __init__(self, rows: list[RowParams], *, prompt_width: int, eos_token_id: int) -> None:
        self.rows = rows
        self.width = prompt_width
        self.eos = eos_token_id
        self.generators = [row_generator(row) for row in rows]
        self.warpers = [_warpers(row) for row in rows]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> Any:
        """The scores with every forced row reduced to its chosen token (a copy: ``generate``
        keeps the raw logits it passed in for the logprobs)."""
        step = input_ids.shape[1] - self.width
        out = scores.clone()
        for i, row in enumerate(self.rows):
            if step >= row.max_new_tokens:
                token = self.eos
            elif (generator := self.generators[i]) is not None:
                token = self._sample(i, input_ids[i : i + 1], scores[i : i + 1], generator)
            else:
                continue  # greedy: generate takes the argmax of the raw scores
            out[i] = float("-inf")
            out[i, token] = 0.0
        return out

    def _sample(
        self, i: int, ids: torch.Tensor, scores: torch.Tensor, generator: torch.Generator
    ) -> int:
        for warper in self.warpers[i]:
            scores = warper(ids, scores)
        probs = torch.softmax(scores, dim=-1)
        return int(torch.multinomial(probs, 1, generator=generator).item())


def _warpers(row: RowParams) -> list[LogitsProcessor]:
    """The processors ``generate`` itself applies when sampling (temperature, then top-p)."""
    if row.temperature <= 0:
        return []
    warpers: list[LogitsProcessor] = [TemperatureLogitsWarper(row.temperature)]
    if row.top_p < 1.0:
        warpers.append(TopPLogitsWarper(row.top_p))
    return warpers
