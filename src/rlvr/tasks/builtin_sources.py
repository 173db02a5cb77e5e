"""The built-in task sources (:mod:`rlvr.tasks.registry`), registered when this module is
imported: the package :mod:`rlvr.tasks` imports it, so any import of a ``rlvr.tasks`` module
registers them. Registration order is the order error messages list them: arithmetic, logic,
gsm8k, math500, jsonl, humaneval, mbpp, reasoning_gym, verifiers, verifiers_episodes
(reasoning_gym and the verifiers sources need their optional library only when used:
``rlvr[gym]``, ``rlvr[verifiers]``), tool_arithmetic. (The registry is
imported as a module, so that no name this module imports looks like a reward registration:
tests/test_layers.py.)
"""

from __future__ import annotations

from pathlib import Path

from rlvr.records import Task
from rlvr.tasks import gym, registry, tool_arithmetic, verifiers_source
from rlvr.tasks.arithmetic.generator import generate as generate_arithmetic
from rlvr.tasks.arithmetic.levels import parse_mixture as parse_arithmetic_mixture
from rlvr.tasks.code import load_humaneval, load_mbpp
from rlvr.tasks.logic import generate_logic
from rlvr.tasks.logic import parse_mixture as parse_logic_mixture
from rlvr.tasks.sources import load_gsm8k, load_math500, load_task_file, registered_task_types


def _task_file(path: Path, task_type: str | None = None) -> list[Task]:
    if task_type is not None:
        return load_task_file(path, task_type)
    return load_task_file(path, known_types=registered_task_types())


@registry.register_source
class ArithmeticSource(registry.TaskSource):
    """Integer arithmetic (:mod:`rlvr.tasks.arithmetic`, levels ``PRESETS``); a path is a
    file of generated math tasks (``rlvr data generate``)."""

    name = "arithmetic"
    generated = True
    default_mixture = "2d+-2d"
    sft_mixture = True
    # the questions *are* arithmetic: repeating "81 * 7" must not earn the reward
    verifier_defaults = {"math": {"accept_unevaluated": False}}

    def read(self, path, split):
        return _task_file(path, "math")

    def generate(self, mixture, n, *, seed, split, unique=True):
        return generate_arithmetic(mixture, n, seed=seed, split=split, unique=unique)

    def check_mixture(self, mixture):
        parse_arithmetic_mixture(mixture)


@registry.register_source
class LogicSource(registry.TaskSource):
    """Countdown and knights-and-knaves puzzles (:mod:`rlvr.tasks.logic`, levels
    ``LEVELS``). Their questions state their own answer format: no instruction by default
    (the math instruction after a knights-and-knaves puzzle would contradict it)."""

    name = "logic"
    generated = True
    default_mixture = "countdown-3:0.5,kk-3:0.5"
    instruction = ""

    def read(self, path, split):
        return _task_file(path, "logic")

    def generate(self, mixture, n, *, seed, split, unique=True):
        return generate_logic(mixture, n, seed=seed, split=split)

    def check_mixture(self, mixture):
        parse_logic_mixture(mixture)


@registry.register_source
class GSM8KSource(registry.TaskSource):
    """GSM8K: a directory with train.jsonl / test.jsonl (validation: test.jsonl), or one
    file."""

    name = "gsm8k"
    own_splits = True
    convert_splits = ("train", "test")  # a directory's file; no split: test.jsonl
    verifier_defaults = {"math": {"accept_unevaluated": False}}

    def read(self, path, split):
        return load_gsm8k(path, split)


@registry.register_source
class Math500Source(registry.TaskSource):
    """MATH-500 (``problem`` / ``solution`` / ``answer``): a file, or a directory holding
    test.jsonl."""

    name = "math500"
    convert_splits = ("test",)

    def read(self, path, split):
        return load_math500(path, "test")


@registry.register_source
class JsonlSource(registry.TaskSource):
    """The project's task record format, tasks of any registered task type."""

    name = "jsonl"

    def read(self, path, split):
        return _task_file(path)


# Code prompts already ask for one ```python block (the math instruction's '#### <answer>' line
# would contradict them); a usage example in the block would run with the program.
CODE_INSTRUCTION = "Do not put tests or example calls in the code block."


@registry.register_source
class HumanEvalSource(registry.TaskSource):
    """HumanEval code tasks (an evaluation set: no train split of its own)."""

    name = "humaneval"
    convert_splits = ("test",)
    instruction = CODE_INSTRUCTION

    def read(self, path, split):
        return load_humaneval(path)


@registry.register_source
class MBPPSource(registry.TaskSource):
    """MBPP code tasks: one file holds every split (train = ids 601-974, validation =
    511-600)."""

    name = "mbpp"
    instruction = CODE_INSTRUCTION
    own_splits = True
    splits_in_one_file = True
    convert_splits = ("train", "validation", "test", "prompt")  # no split: every task
    empty_split = "no MBPP tasks in the {split} split (task ids 601-974 / 511-600)"

    def read(self, path, split):
        return load_mbpp(path, split)


@registry.register_source
class ReasoningGymSource(registry.TaskSource):
    """reasoning-gym's procedural datasets (:mod:`rlvr.tasks.gym`): the mixture names
    datasets with options and weights, ``countdown(min_numbers=3):0.5,knights_knaves:0.5``;
    scored by each dataset's ``score_answer``. A path is a file of generated tasks."""

    name = "reasoning_gym"
    generated = True
    default_mixture = "basic_arithmetic:0.5,leg_counting:0.5"
    instruction = gym.INSTRUCTION

    def read(self, path, split):
        return _task_file(path, gym.TASK_TYPE)

    def generate(self, mixture, n, *, seed, split, unique=True):
        return gym.generate_gym(mixture, n, seed=seed, split=split, unique=unique)

    def check_mixture(self, mixture):
        try:
            gym.parse_mixture(mixture)
        except ImportError as exc:
            raise ValueError(str(exc)) from None


@registry.register_source
class VerifiersSource(registry.TaskSource):
    """Single-turn ``verifiers`` environments (:mod:`rlvr.tasks.verifiers_source`): the
    mixture names environment modules with their ``load_environment`` arguments and weights,
    ``my_env(num_examples=500)``; scored by each environment's rubric. Their prompts state
    their own answer format (the environment's system prompt): no instruction by default."""

    name = "verifiers"
    generated = True
    default_mixture = None
    instruction = ""

    episodic = False

    def read(self, path, split):
        return _task_file(path, verifiers_source.TASK_TYPE)

    def generate(self, mixture, n, *, seed, split, unique=True):
        return verifiers_source.generate_verifiers(mixture, n, seed=seed, split=split,
                                                   unique=unique, episodic=self.episodic)

    def check_mixture(self, mixture):
        try:
            verifiers_source.parse_mixture(mixture, self.episodic)
        except ImportError as exc:
            raise ValueError(str(exc)) from None


@registry.register_source
class VerifiersEpisodesSource(VerifiersSource):
    """The rows of the ``verifiers`` environment whose episodes ``env.source: verifiers``
    plays (:mod:`rlvr.envs.verifiers_adapter`): as ``verifiers``, but multi-turn environments
    are admitted. Set by ``env.source: verifiers`` (:class:`rlvr.train.config.RunConfig`),
    not written by hand."""

    name = "verifiers_episodes"
    episodic = True


@registry.register_source
class ToolArithmeticSource(registry.TaskSource):
    """Arithmetic that needs a calculator (:mod:`rlvr.tasks.tool_arithmetic`: 3-digit
    products, 4-digit by 2-digit, three operands, word problems), for tool-use presets; a
    path is a file of generated math tasks."""

    name = "tool_arithmetic"
    generated = True
    default_mixture = tool_arithmetic.DEFAULT_MIXTURE
    sft_mixture = True
    # the questions are arithmetic: repeating "347 * 628" (or the call) must not score
    verifier_defaults = {"math": {"accept_unevaluated": False}}

    def read(self, path, split):
        return _task_file(path, "math")

    def generate(self, mixture, n, *, seed, split, unique=True):
        return tool_arithmetic.generate(mixture, n, seed=seed, split=split, unique=unique)

    def check_mixture(self, mixture):
        tool_arithmetic.parse_mixture(mixture)
