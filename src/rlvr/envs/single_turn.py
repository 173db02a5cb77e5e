"""The ``single_turn`` environment: today's tasks as one-turn episodes.

The prompt is the caller's messages unchanged, the one assistant turn ends the episode
(``stop``, or ``length`` / ``max_tokens`` when it was cut) and is scored by the reward pipeline
exactly as the single-turn path scores a completion (``ScoreRequest(text, task.reference,
task.task_type)``): the same reward for the same completion.
"""

from __future__ import annotations

from rlvr.envs.base import Environment
from rlvr.envs.registry import register_env


@register_env
class SingleTurnEnv(Environment):
    """One assistant turn, then done with the reward pipeline's verdict."""

    name = "single_turn"

    @property
    def max_turns(self) -> int:
        """Always 1 (``config.max_turns`` does not apply)."""
        return 1
