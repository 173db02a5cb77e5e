"""Imports the built-in reward modules so that their ``@register_*`` decorators run."""

from rlvr.rewards import aggregate  # noqa: F401
from rlvr.rewards import format  # noqa: F401
from rlvr.rewards import math_task  # noqa: F401
from rlvr.rewards import code  # noqa: F401
from rlvr.rewards import logic  # noqa: F401
