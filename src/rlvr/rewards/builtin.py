"""Imports the built-in reward modules so that their ``@register_*`` decorators run; registers
the logic, reasoning-gym and verifiers-environment verifiers, whose modules are also imported
by task modules and so register nothing themselves (a task module registers nothing into the
reward registry at import). The last two import their optional library on first use only."""

from rlvr.rewards import aggregate  # noqa: F401
from rlvr.rewards import format  # noqa: F401
from rlvr.rewards import math_task  # noqa: F401
from rlvr.rewards import code  # noqa: F401
from rlvr.rewards import gym, logic, verifiers_env
from rlvr.rewards.registry import register_verifier

register_verifier(logic.TASK_TYPE, format_rule="hash_line")(logic.verify_logic)
register_verifier(gym.TASK_TYPE, format_rule="answer_tag")(gym.verify_gym)
register_verifier(verifiers_env.TASK_TYPE, format_rule="none")(verifiers_env.verify_rubric)
