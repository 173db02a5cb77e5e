"""Environments by name: what ``env.name`` (:class:`rlvr.envs.EnvConfig`) accepts.

An environment is one :class:`rlvr.envs.Environment` subclass registered with
:func:`register_env` (as task sources are with ``register_source``)::

    @register_env
    class Guess(Environment):
        name = "guess"
        ...

The table is :data:`ENVIRONMENTS` (a :class:`rlvr.registry.Registry`). The built-ins
(``single_turn``, ``tool``, ``verifiers``) register when the package :mod:`rlvr.envs` imports
their modules (so any import of a ``rlvr.envs`` module registers them); user environments when
their module is imported (``env.plugins``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rlvr.registry import Registry

if TYPE_CHECKING:  # annotations only: the base class imports this module's users
    from rlvr.envs.base import Environment
    from rlvr.envs.config import EnvConfig

#: Environment classes by name (``env.name``).
ENVIRONMENTS: Registry[type, Any] = Registry("environment", field="env.name")


def register_env(cls: type[Environment]) -> type[Environment]:
    """Class decorator: register ``cls`` under ``cls.name``; returns ``cls``.

    Raises:
        ValueError: ``cls.name`` is missing or not a non-empty string, or another class is
            already registered under it.
    """
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"environment {cls!r} needs a class attribute `name` (a non-empty "
                         "string)")
    return ENVIRONMENTS.add(name, cls)


def unregister_env(name: str) -> None:
    """Remove a registered environment (tests, plugins that replace one); unknown names pass."""
    ENVIRONMENTS.unregister(name)


def env_class(name: str) -> type[Environment]:
    """The environment class registered under ``name``.

    Raises:
        KeyError: unknown name; the message lists the registered ones and the closest match.
    """
    return ENVIRONMENTS.get(name)


def env_names() -> list[str]:
    """Names of all registered environments, sorted."""
    return ENVIRONMENTS.names()


def make_env(config: EnvConfig, rewards: Any) -> Environment:
    """The environment ``config.name``, built from ``config`` and scoring with ``rewards``
    (a :class:`rlvr.rewards.RewardPipeline`, or anything with its ``score_batch``).

    Raises:
        KeyError: ``config.name`` is not registered (a validated config always is).
    """
    return env_class(config.name)(config, rewards)
