"""Per-step hooks into an engine's decode loop (``engine.generate(prompts, params,
hooks=...)``): what ``rlvr serve`` needs to stream tokens as they are sampled, to change the
logits of a request's rows (penalties, banned or allowed tokens, ``min_p``) and to stop rows
early (a stop string, a client that went away). The trainer passes no hooks; without them the
engines decode exactly as before.

Row numbers are the engine's output rows (``prompt_index * n + sample``, see
:mod:`rlvr.rollout.types`). Step ``t`` is the ``t``-th completion token (0: the one sampled
from the prefill's logits).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import Tensor


@runtime_checkable
class DecodeHooks(Protocol):
    """Called by the ``torch`` and ``hf`` engines at every decode step."""

    def process_logits(self, rows: Tensor, step: int, logits: Tensor) -> Tensor:
        """The logits to sample step ``step`` of ``rows`` from.

        Args:
            rows: LongTensor[R], output rows of the batch's slots (finished rows included; what
                is sampled for them is discarded).
            step: the completion position being sampled.
            logits: FloatTensor[R, V], the model's logits (do not modify in place).

        Returns:
            FloatTensor[R, V] (``-inf`` bans a token). Reported log-probs stay those of the
            model's own logits.
        """
        ...

    def on_step(self, rows: Tensor, step: int, tokens: Tensor, logprobs: Tensor,
                logits: Tensor) -> Tensor | None:
        """Told the tokens just sampled for the live (unfinished) ``rows``.

        Args:
            rows: LongTensor[R] live output rows.
            step: the completion position of ``tokens``.
            tokens: LongTensor[R], the sampled tokens (a stop token included).
            logprobs: FloatTensor[R], their log-probs as the engine records them
                (``RolloutOutput.logprobs``: tempered, from the logits they were drawn from).
            logits: FloatTensor[R, V], the model's logits they were drawn from (before
                :meth:`process_logits`).

        Returns:
            BoolTensor[R], True for rows to finish now (their completion ends with this
            token, finish reason ``length`` unless it was a stop token), or None.
        """
        ...
