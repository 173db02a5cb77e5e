"""Name -> function registries of the reward pipeline (R1).

A task type is served by three pluggable parts, each registered under a name so that a new task
never touches the training loop (open-r1 style: one small function, one decorator):

- a **verifier** ``(completion: str, reference: Any, **options) -> Verdict`` that extracts the
  final answer (its parser) and judges it against the reference (:data:`VERIFIERS`, with the
  task type's defaults as :class:`VerifierMeta`);
- a **format rule** ``(completion: str, **options) -> float`` in [0, 1] (:data:`FORMAT_RULES`);
- a **reward aggregator** ``(components: dict[str, float], weights: dict[str, float]) ->
  float`` (:data:`REWARD_AGGREGATORS`).

Example::

    @register_verifier("math", format_rule="marked_answer")
    def math_outcome(completion: str, reference: str, **options) -> Verdict: ...

The tables are :class:`rlvr.registry.Registry` objects. The built-ins are registered by the
plain import of :mod:`rlvr.rewards.builtin` at the end of this module, so whoever looks a name
up here sees them (and the import contracts see the edge). A task module never imports this
module: importing it registers the built-ins, and tasks register nothing into the reward
registry (the ``tasks-register-nothing`` contract in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rlvr.registry import Registry
from rlvr.rewards.types import Verdict


class Verifier(Protocol):
    def __call__(self, completion: str, reference: Any, **options: Any) -> Verdict: ...


FormatRule = Callable[..., float]
Aggregator = Callable[[dict[str, float], dict[str, float]], float]
BatchVerifier = Callable[[list[tuple[str, Any, dict]]], list]


@dataclass(frozen=True)
class VerifierMeta:
    """What a verifier records beside its function (the defaults of its task type).

    Attributes:
        format_rule: the name of the format rule used for this task type unless the config
            picks another one (``reward.format_rule``); None: ``none``.
        timeout_s: the wall-time bound of one call in seconds unless
            ``reward.timeout_overrides_s`` names the task type; None: ``reward.timeout_s``.
            For verifiers whose first call in a worker imports a library.
        options: the dataclass whose fields are the verifier's keyword options: a config's
            ``reward.verifier_options.<task_type>`` is checked against its field names and
            their defaults' types when it loads, instead of failing every call.
        batch: ``batch(items) -> list[Verdict | None]``, the batch form: the reward pipeline
            calls it, in its own process, with every ``(completion, reference, options)`` of a
            batch this verifier scores, before it starts the verifier pool; an item it answers
            ``None`` for goes to the pool as usual. For verifiers that send work elsewhere in
            batches (reasoning-gym's untrusted scorers go to the sandbox); it bounds its own
            time.
    """

    format_rule: str | None = None
    timeout_s: float | None = None
    options: type | None = None
    batch: BatchVerifier | None = None


#: Verifiers by task type (a record's ``task_type``).
VERIFIERS: Registry[Verifier, VerifierMeta] = Registry("verifier", VerifierMeta,
                                                       field="task_type")
#: Format rules by name (``reward.format_rule``).
FORMAT_RULES: Registry[FormatRule, Any] = Registry("format rule", field="reward.format_rule")
#: Reward aggregators by name (``reward.aggregator``); not the test-time aggregators of
#: ``rlvr eval`` (:data:`rlvr.eval.metrics.SAMPLE_AGGREGATORS`).
REWARD_AGGREGATORS: Registry[Aggregator, Any] = Registry("reward aggregator",
                                                         field="reward.aggregator")


def register_verifier(task_type: str, *, format_rule: str | None = None,
                      timeout_s: float | None = None, options: type | None = None,
                      batch: BatchVerifier | None = None) -> Callable:
    """Decorator: register ``fn`` as the outcome verifier of ``task_type``, with the
    :class:`VerifierMeta` fields as keywords.

    Args:
        task_type: the value of a record's ``task_type`` field, e.g. ``"math"``.

    Raises:
        ValueError: if another function is already registered under ``task_type``.
    """
    return VERIFIERS.register(task_type, format_rule=format_rule, timeout_s=timeout_s,
                              options=options, batch=batch)


def register_format_rule(name: str) -> Callable:
    """Decorator: register a format rule ``(completion, **options) -> float in [0, 1]`` under
    ``name``.

    Raises:
        ValueError: if another function is already registered under ``name``.
    """
    return FORMAT_RULES.register(name)


def register_aggregator(name: str) -> Callable:
    """Decorator: register a reward aggregator ``(components, weights) -> float`` under
    ``name``.

    Raises:
        ValueError: if another function is already registered under ``name``.
    """
    return REWARD_AGGREGATORS.register(name)


# The built-ins, registered by a plain import (after the tables and decorators they use exist).
from rlvr.rewards import builtin  # noqa: E402,F401
