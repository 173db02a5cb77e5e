"""Imports the built-in reward modules so that their ``@register_*`` decorators run; registers
the logic, reasoning-gym and verifiers-environment verifiers, whose modules are also imported
by task modules and so register nothing themselves (a task module registers nothing into the
reward registry at import). The last two import their optional library on first use only."""

# The import order is the registration order (the order registries list their names in).
# isort: off
from rlvr.rewards import aggregate  # noqa: F401
from rlvr.rewards import format  # noqa: F401
from rlvr.rewards import math_task  # noqa: F401
from rlvr.rewards import code  # noqa: F401
from rlvr.rewards import gym, logic, verifiers_env
# isort: on
from rlvr.rewards.registry import register_batch_verifier, register_verifier

register_verifier(logic.TASK_TYPE, format_rule="hash_line")(logic.verify_logic)
# a worker's first call imports the library (reasoning-gym 1-7 s, verifiers ~6 s) and builds
# the dataset or environment: more than the default 2 s bound; an untrusted reasoning-gym
# dataset's single call also starts a sandbox that imports the dataset's module (1.5-7 s) and
# may spend gym_sandbox.ANSWER_WALL_S on the answer
register_verifier(gym.TASK_TYPE, format_rule="answer_tag", timeout_s=60.0)(gym.verify_gym)
register_batch_verifier(gym.TASK_TYPE)(gym.verify_gym_batch)
register_verifier(verifiers_env.TASK_TYPE, format_rule="none",
                  timeout_s=60.0)(verifiers_env.verify_rubric)
