"""Imports the built-in reward modules so that their ``@register_*`` decorators run; registers
the logic, reasoning-gym and verifiers-environment verifiers, whose modules are also imported
by task modules and so register nothing themselves (a task module registers nothing into the
reward registry at import); declares the math and code verifiers (and the code_block format
rule), whose modules are imported on first use. :mod:`rlvr.rewards.registry` imports this
module at its end, so every lookup sees the built-ins. The reasoning-gym and verifiers
verifiers import their optional library (``rlvr[gym]``, ``rlvr[verifiers]``) on first call
only: their names are registered eagerly, so a config naming them validates without the
library installed."""

# The import order is the registration order (the order registries list their names in).
# isort: off
from rlvr.rewards import aggregate  # noqa: F401
from rlvr.rewards import format  # noqa: F401
from rlvr.rewards import gym, logic, verifiers_env
from rlvr.rewards.math.options import MathVerifyConfig
from rlvr.rewards.registry import FORMAT_RULES, VERIFIERS, register_verifier


# Declared here, loaded on first use: the math verifier's module imports sympy (about a
# second), the code verifier's the sandbox; a config naming them validates, and `rlvr --help`
# starts, without either. Their modules' decorators register the functions with the same
# metadata when the loaders import them.
def _load_math() -> None:
    from rlvr.rewards import math_task  # noqa: F401


def _load_code() -> None:
    from rlvr.rewards import code  # noqa: F401


VERIFIERS.lazy("math", _load_math, format_rule="marked_answer", options=MathVerifyConfig)
VERIFIERS.lazy("code", _load_code, format_rule="code_block")
FORMAT_RULES.lazy("code_block", _load_code)

register_verifier(logic.TASK_TYPE, format_rule="hash_line")(logic.verify_logic)
# a worker's first call imports the library (reasoning-gym 1-7 s, verifiers ~6 s) and builds
# the dataset or environment: more than the default 2 s bound; an untrusted reasoning-gym
# dataset's single call also starts a sandbox that imports the dataset's module (1.5-7 s) and
# may spend gym_sandbox.ANSWER_WALL_S on the answer
register_verifier(gym.TASK_TYPE, format_rule="answer_tag", timeout_s=60.0,
                  batch=gym.verify_gym_batch)(gym.verify_gym)
register_verifier(verifiers_env.TASK_TYPE, format_rule="none",
                  timeout_s=60.0)(verifiers_env.verify_rubric)
