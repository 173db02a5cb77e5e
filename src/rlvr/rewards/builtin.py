"""Imports the built-in reward modules so that their ``@register_*`` decorators run; registers
the logic verifier, whose module is also imported by :mod:`rlvr.tasks.logic` and so registers
nothing itself (a task module registers nothing into the reward registry at import)."""

from rlvr.rewards import aggregate  # noqa: F401
from rlvr.rewards import format  # noqa: F401
from rlvr.rewards import math_task  # noqa: F401
from rlvr.rewards import code  # noqa: F401
from rlvr.rewards import logic
from rlvr.rewards.registry import register_verifier

register_verifier(logic.TASK_TYPE, format_rule="hash_line")(logic.verify_logic)
