"""Integer arithmetic problems, deterministic by seed, with verified worked solutions.

Each problem is an expression over integers with ``+ - *`` and optionally exact division
``/``, parentheses and several operands, e.g. ``37 + 58`` or ``(4 + 7) * 3``. A problem becomes
a :class:`~rlvr.records.Task` whose ``reference`` is the integer answer as a string, whose
``prompt`` is the question text (``"What is 37 + 58?"``), and whose ``solution`` is a
step-by-step worked solution in the target output format, by default GSM8K's::

    37 + 58 = 95
    #### 95

Every solution is checked before it is emitted: each written equation is recomputed by
:func:`evaluate` (exact integer ``+ - * / //`` in :data:`rlvr.exact.INTEGER`'s grammar, never
Python's ``eval``) and the final line must equal the answer (R17, R27).

Train / validation hygiene (R25): the split of a problem is a function of the problem itself
(a hash of its commutativity-normalised expression), not of the seed or of the draw order, so
the same expression, or a reordering of a sum or product like ``58 + 37`` for ``37 + 58``, can
never land in both splits, whatever seeds the two sets were generated with.

Difficulty (R24) is a :class:`Level`: digits per operand, operators, parentheses. Named presets
live in :data:`PRESETS` (``1d+1d``, ``1dop1d``, ``2d+-2d`` and its sums ``2d+2d`` and
differences ``2d-2d``, ``2dx1d``, ``2dx2d``, ``3ops``, ``3ops-paren``, ``div``); a mixture
spec such as ``"2d+-2d:0.6,2dx1d:0.4"`` draws levels by weight.

Modules: :mod:`~rlvr.tasks.arithmetic.expressions` (expression trees: evaluation, text),
:mod:`~rlvr.tasks.arithmetic.solutions` (worked solutions and their check),
:mod:`~rlvr.tasks.arithmetic.levels` (levels, presets, mixtures) and
:mod:`~rlvr.tasks.arithmetic.generator` (splits, sampling, tasks: :func:`generate`).
"""

from rlvr.tasks.arithmetic.expressions import OPERATORS, Expr, ExpressionError, evaluate, render
from rlvr.tasks.arithmetic.generator import (
    DEFAULT_PROMPT_TEMPLATE,
    DEFAULT_SOLUTION_TEMPLATE,
    DEFAULT_VAL_FRACTION,
    SOURCE,
    TASK_TYPE,
    generate,
    make_task,
    sample_expression,
    split_key,
    split_of,
    train_val_split,
)
from rlvr.tasks.arithmetic.levels import PRESETS, Level, MixtureSpec, get_level, parse_mixture
from rlvr.tasks.arithmetic.solutions import SolutionCheck, check_solution, solution_steps
from rlvr.tasks.mixture import SPLITS

__all__ = [
    "DEFAULT_PROMPT_TEMPLATE",
    "DEFAULT_SOLUTION_TEMPLATE",
    "DEFAULT_VAL_FRACTION",
    "OPERATORS",
    "PRESETS",
    "SOURCE",
    "SPLITS",
    "TASK_TYPE",
    "Expr",
    "ExpressionError",
    "Level",
    "MixtureSpec",
    "SolutionCheck",
    "check_solution",
    "evaluate",
    "generate",
    "get_level",
    "make_task",
    "parse_mixture",
    "render",
    "sample_expression",
    "solution_steps",
    "split_key",
    "split_of",
    "train_val_split",
]
