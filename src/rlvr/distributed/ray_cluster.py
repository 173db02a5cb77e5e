"""Ray's lifetime for the scale-out workers (:mod:`rlvr.distributed.ray_workers`): start or
connect to a cluster (:func:`init_ray`), size a local one (:func:`local_num_cpus`) and wait for
actors to come up (:func:`wait_ready`). Each function imports ``ray``, an optional
dependency (``pip install rlvr[ray]``), so the module itself imports without it.
"""

from __future__ import annotations

import logging
import os

LOCAL = "local"
DEFAULT_STARTUP_TIMEOUT_S = 300.0


# ---------------------------------------------------------------------------------------------
# Ray's lifetime
# ---------------------------------------------------------------------------------------------


def init_ray(address: str = LOCAL, num_cpus: int | None = None) -> bool:
    """Start or connect to Ray unless this process already is connected.

    Args:
        address: ``"local"`` starts a private cluster on this machine
            (``ray.init(address="local", num_cpus=num_cpus, include_dashboard=False)``, with
            Ray's usage-stats reporting off unless ``RAY_USAGE_STATS_ENABLED`` is set);
            anything else is passed to ``ray.init(address=...)`` (``"auto"``,
            ``"ray://host:10001"``, ...).
        num_cpus: logical CPUs of a local cluster (what Ray schedules actors against); ignored
            for an existing cluster.

    Returns:
        True if this call started / connected Ray (the caller should ``ray.shutdown()`` when
        done), False if Ray was already initialised (left to whoever started it).

    Raises:
        ConnectionError / RuntimeError: from ``ray.init`` when the address cannot be reached.
    """
    import ray  # optional dependency (extra `ray`)

    if ray.is_initialized():
        return False
    if address == LOCAL:
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        ray.init(address=LOCAL, num_cpus=num_cpus, include_dashboard=False,
                 logging_level=logging.WARNING)
    else:
        ray.init(address=address, logging_level=logging.WARNING)
    return True


def kill_actors(actors: list, own_ray: bool) -> None:
    """Kill ``actors``; shut Ray down too when the caller started it (``own_ray``). Nothing
    happens when Ray is not running."""
    import ray  # optional dependency (extra `ray`)

    if ray.is_initialized():
        for actor in actors:
            ray.kill(actor)
        if own_ray:
            ray.shutdown()


def local_num_cpus(actors: int) -> int:
    """Logical CPUs for a ``"local"`` cluster: this machine's cores, but at least ``actors``
    (each actor asks for one CPU; fewer would leave some unscheduled forever)."""
    return max(os.cpu_count() or 1, actors)


def wait_ready(futures: list, actors: list, what: str, timeout_s: float) -> list:
    """``ray.get`` the actors' first calls; kill them and raise if they do not start in time."""
    import ray  # optional dependency (extra `ray`)

    try:
        return ray.get(futures, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        for actor in actors:
            ray.kill(actor)
        raise RuntimeError(
            f"{len(actors)} {what} actors did not start within {timeout_s:.0f} s: the cluster "
            f"probably lacks free CPUs (each asks for its num_cpus; available: "
            f"{ray.available_resources().get('CPU', 0)})") from None
