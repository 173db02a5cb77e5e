"""Data-parallel policy updates inside ``rlvr train`` (``grpo.update_processes > 1``).

Rank 0 is the run itself: rollouts, rewards, advantages, the KL reference's and the old
policy's log-probs, validation, health checks, checkpoints. It starts ``W - 1`` update
workers (processes on this machine, ``torch.multiprocessing`` spawn), joins them in a gloo
process group and wraps its policy in DDP through ``accelerate`` (which broadcasts rank 0's
weights, so every replica starts equal). Every step it broadcasts the step's trainable rows
(token ids, advantages, old / reference log-probs, the learning rate) to the workers; each
rank computes the loss gradient of its contiguous shard (:func:`rlvr.distributed.ddp.shard_rows`)
with :func:`rlvr.distributed.ddp.ddp_update`, DDP averages the gradients, and all ranks take the
same clipped AdamW step, so the replicas stay identical and the update equals the
single-process one up to float summation order (tests/distributed/test_train_ddp.py).

When rank 0 changes its policy or optimizer outside an update (a health-check rollback), it
sends its full state to the workers (:meth:`UpdateGroup.sync`). Workers exit when rank 0 sends
``stop`` (:meth:`UpdateGroup.close`) or when rank 0's process disappears.

On a 2-core CPU this buys nothing (the update already uses every core); it is the same code
path that spreads the update over several GPUs or CPU sockets.
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
import time
import warnings

import torch
import torch.multiprocessing as mp

from rlvr.distributed.ddp import ddp_update, shard_rows
from rlvr.models import load_model_and_tokenizer
from rlvr.models.lora import apply_lora

_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for the process group's store)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def join_process_group(rank: int, world: int, port: int, timeout_s: float = 1800.0):
    """Join this machine's gloo process group as ``rank`` of ``world`` (the group's store on
    127.0.0.1:``port``) and return the CPU ``accelerate.Accelerator``, which adopts it.

    Sets the launcher environment accelerate reads (RANK, WORLD_SIZE, LOCAL_RANK, ...), as
    ``torchrun`` would, and keeps this process's torch thread count (accelerate would set it
    to cores / processes).

    Raises:
        RuntimeError / DistBackendError: the other ranks did not join within ``timeout_s``.
    """
    # optional dependency: accelerate (extra `train`)
    from accelerate import Accelerator

    os.environ.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                      LOCAL_WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    torch.distributed.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s))
    threads = torch.get_num_threads()
    with warnings.catch_warnings():  # "OMP_NUM_THREADS unset, we set it at ...": undone below
        warnings.simplefilter("ignore", UserWarning)
        accelerator = Accelerator(cpu=True)
    # accelerate sets cores / processes when OMP_NUM_THREADS is unset
    torch.set_num_threads(threads)
    return accelerator


def _broadcast(message):
    box = [message]
    torch.distributed.broadcast_object_list(box, src=0)
    return box[0]


def _update_on_shard(model, optimizer, payload: dict, config, accelerator) -> dict[str, float]:
    """This rank's part of one step: ``grpo.mu`` calls of :func:`ddp_update` on its shard."""
    for group, lr in zip(optimizer.param_groups, payload["lr"]):
        group["lr"] = lr
    seqs, n = payload["seqs"], payload["advantages"].shape[0]
    rows = shard_rows(n, accelerator.process_index, accelerator.num_processes)
    empty = rows.stop == rows.start
    pick = lambda t: None if t is None else t[rows]  # noqa: E731
    epochs = []
    for _ in range(config.grpo.mu):
        metrics = ddp_update(model, optimizer, None if empty else seqs.rows(rows),
                             payload["advantages"][rows], pick(payload["old"]), config,
                             accelerator, ref_log_probs=pick(payload["ref"]),
                             kl_coef=payload["kl_coef"],
                             sampler_log_probs=pick(payload.get("sampler")))
        epochs.append(metrics)
        if metrics.get("update_skipped_nonfinite"):
            break  # every rank sees the same global gradient norm, so all stop together
    keys = set().union(*epochs)
    local = {k: sum(m.get(k, 0.0) for m in epochs) / len(epochs) for k in keys}
    return _global_metrics(local, rows.stop - rows.start)


# Equal on every rank (global by construction), or per-rank counts to add up; every other
# metric (pg_loss, kl, clip_frac, entropy, ...) is a rank's micro-batch mean, combined as a
# mean weighted by the ranks' rows.
_SAME_ON_ALL_RANKS = ("grad_norm", "global_rows", "global_tokens", "nonfinite_grad_norm",
                      "update_skipped_nonfinite", "skipped_update")
_SUMMED = ("nonfinite_log_probs", "nonfinite_loss")


def _global_metrics(local: dict[str, float], rows: int) -> dict[str, float]:
    """The step's metrics over all ranks (a collective: every rank calls it once per step)."""
    gathered: list = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(gathered, (local, rows))
    return combine_rank_metrics(gathered)


def combine_rank_metrics(gathered: list[tuple[dict[str, float], int]]) -> dict[str, float]:
    """Combine ``(metrics, rows)`` of every rank: global values (grad norm, global counts,
    skip flags) from the first rank, non-finite counts summed, every other metric as the mean
    weighted by the ranks' rows (ranks without the metric, e.g. an empty shard, left out)."""
    out: dict[str, float] = {}
    for key in set().union(*(m for m, _ in gathered)):
        present = [(m[key], n) for m, n in gathered if key in m]
        if key in _SAME_ON_ALL_RANKS:
            out[key] = present[0][0]
        elif key in _SUMMED:
            out[key] = sum(v for v, _ in present)
        else:
            weight = sum(n for _, n in present)
            out[key] = (sum(v * n for v, n in present) / weight if weight
                        else sum(v for v, _ in present) / len(present))
    return out


class UpdateGroup:
    """Rank 0's handle on its data-parallel update workers.

    Args:
        config: the run config (``grpo.update_processes`` = W >= 2 processes in all).
        policy: rank 0's policy (wrapped in DDP here; the object itself stays the run's
            policy for rollouts, evaluation and checkpoints).
        optimizer: rank 0's optimizer over the policy's trainable parameters.
        timeout_s: how long a worker may wait for rank 0's next message (rank 0 may spend
            many minutes on evaluation between two updates); rank 0 checks that its workers
            are alive before every message instead.

    Raises:
        RuntimeError: a worker exited before joining the process group (its exit code is in
            the message), or later, before a message to it.
    """

    def __init__(self, config, policy, optimizer, timeout_s: float = 7 * 24 * 3600.0):
        self.config, self.optimizer = config, optimizer
        self.world = config.grpo.update_processes
        if self.world > (os.cpu_count() or 1):
            warnings.warn(f"grpo.update_processes = {self.world} exceeds this machine's "
                          f"{os.cpu_count()} cores: the update will be slower, not faster",
                          stacklevel=2)
        port = free_port()
        threads = config.threads or torch.get_num_threads()
        self.update_threads = max(1, threads // self.world)
        context = mp.get_context("spawn")
        ready = [context.Event() for _ in range(1, self.world)]
        self.workers = [context.Process(target=_worker_main, daemon=True, name=f"rlvr-update-{r}",
                                        args=(r, self.world, port, type(config),
                                              config.model_dump_json(), self.update_threads,
                                              os.getpid(), timeout_s, ready[r - 1]))
                        for r in range(1, self.world)]
        for worker in self.workers:
            worker.start()
        while not all(event.is_set() for event in ready):  # model loading is what can fail
            self._check_workers()
            time.sleep(0.05)
        self._previous_env = {k: os.environ.get(k) for k in _ENV}
        self.accelerator = join_process_group(0, self.world, port, timeout_s)
        self.model = self.accelerator.prepare(policy)  # DDP: broadcasts rank 0's weights
        self.sync(weights=False)  # the optimizer state (non-empty after a resume)

    def update(self, seqs, advantages, old_log_probs, ref_log_probs, kl_coef: float,
               sampler_log_probs=None) -> dict[str, float]:
        """One step's update over all ranks; returns the step's metrics over all ranks
        (loss terms as row-weighted means of the ranks' micro-batch means).
        ``sampler_log_probs`` (FloatTensor[n, T], the rollout engine's) is sent only when
        ``algo.tis_cap`` weights the loss with it."""
        payload = {"seqs": seqs, "advantages": advantages, "old": old_log_probs,
                   "ref": ref_log_probs, "kl_coef": kl_coef, "sampler": sampler_log_probs,
                   "lr": [g["lr"] for g in self.optimizer.param_groups]}
        self._check_workers()
        _broadcast(("update", payload))
        threads = torch.get_num_threads()
        torch.set_num_threads(self.update_threads)  # the workers use the other cores
        try:
            return _update_on_shard(self.model, self.optimizer, payload, self.config,
                                    self.accelerator)
        finally:
            torch.set_num_threads(threads)

    def sync(self, weights: bool = True) -> None:
        """Send rank 0's optimizer state (and weights) to the workers (after a rollback)."""
        policy = self.accelerator.unwrap_model(self.model)
        self._check_workers()
        _broadcast(("sync", {"weights": policy.state_dict() if weights else None,
                             "optimizer": self.optimizer.state_dict()}))

    def _check_workers(self) -> None:
        dead = [(w.name, w.exitcode) for w in self.workers if not w.is_alive()]
        if dead:
            for worker in self.workers:
                worker.terminate()
            raise RuntimeError(f"data-parallel update worker(s) exited: "
                               f"{', '.join(f'{n} (exit code {c})' for n, c in dead)}")

    def close(self) -> None:
        """Stop the workers and leave the process group (idempotent)."""
        if not self.workers:
            return
        try:
            if all(w.is_alive() for w in self.workers):
                _broadcast(("stop", None))
        finally:
            for worker in self.workers:
                worker.join(timeout=30)
                if worker.is_alive():
                    worker.terminate()
            self.workers = []
            if torch.distributed.is_initialized():
                torch.distributed.destroy_process_group()
            # optional dependency: accelerate (extra `train`)
            from accelerate.state import AcceleratorState

            AcceleratorState._reset_state(True)
            for key, value in self._previous_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _watch_parent(parent: int) -> None:
    """Exit when rank 0's process is gone (a killed run must not leave workers behind)."""
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(1.0)


def _worker_main(rank: int, world: int, port: int, config_type, config_json: str, threads: int,
                 parent: int, timeout_s: float, ready) -> None:
    """An update worker: the policy's architecture, an AdamW like rank 0's, then messages.

    ``config_type`` is rank 0's config class (the run's ``RunConfig``, pickled by reference),
    which rebuilds the config from ``config_json``: this layer does not import ``train``."""
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    torch.set_num_threads(threads)
    config = config_type.model_validate_json(config_json)
    policy, _ = load_model_and_tokenizer(config.model.name, seed=config.seed)
    if config.model.lora_rank:
        policy = apply_lora(policy, config.model.lora_rank, config.model.lora_alpha)
    g = config.grpo
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad],
                                  lr=g.learning_rate, weight_decay=g.weight_decay)
    ready.set()
    accelerator = join_process_group(rank, world, port, timeout_s)
    model = accelerator.prepare(policy)
    while True:
        kind, body = _broadcast(None)
        if kind == "stop":
            break
        if kind == "sync":
            if body["weights"] is not None:
                accelerator.unwrap_model(model).load_state_dict(body["weights"])
            optimizer.load_state_dict(body["optimizer"])
        elif kind == "update":
            _update_on_shard(model, optimizer, body, config, accelerator)
    torch.distributed.destroy_process_group()
