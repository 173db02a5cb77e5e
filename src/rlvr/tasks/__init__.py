"""Task sources: each turns some data into :class:`rlvr.records.Task` records.

- :mod:`rlvr.tasks.arithmetic`: the built-in generator of integer arithmetic problems with
  difficulty levels, a leak-free train / validation split and verified worked solutions.
"""

from rlvr.tasks.arithmetic import PRESETS as ARITHMETIC_PRESETS
from rlvr.tasks.arithmetic import Level as ArithmeticLevel
from rlvr.tasks.arithmetic import generate as generate_arithmetic

__all__ = ["ARITHMETIC_PRESETS", "ArithmeticLevel", "generate_arithmetic"]
