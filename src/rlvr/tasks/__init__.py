"""Task sources: each turns some data into :class:`rlvr.records.Task` records.

- :mod:`rlvr.tasks.arithmetic`: the built-in generator of integer arithmetic problems with
  difficulty levels, a leak-free train / validation split and verified worked solutions.
- :mod:`rlvr.tasks.registry`: task sources by name (``data.source``); the built-in ones are
  defined in :mod:`rlvr.tasks.builtin_sources`, imported here so that any import of a
  ``rlvr.tasks`` module registers them.
"""

from rlvr.tasks import builtin_sources  # noqa: F401  (registers the built-in task sources)
from rlvr.tasks.arithmetic import PRESETS as ARITHMETIC_PRESETS
from rlvr.tasks.arithmetic import Level as ArithmeticLevel
from rlvr.tasks.arithmetic import generate as generate_arithmetic

__all__ = ["ARITHMETIC_PRESETS", "ArithmeticLevel", "generate_arithmetic"]
