"""Which prompts a GRPO step trains on: deterministic draws from weighted pools (data sources
of a mixture, R26; difficulty tiers, R24), with optional dynamic sampling that skips prompts
whose groups keep coming back all-correct or all-wrong (DAPO, Yu et al. 2025, arXiv:2503.14476,
sec. 3.2; verl's ``filter_groups``). Its whole state is a small dict saved in every checkpoint,
so a resumed run draws the same prompts.
"""

from __future__ import annotations

import random
from collections import Counter

from rlvr.data.stratify import TIERS


class TaskSampler:
    """Draws task indices slot by slot: a pool by weight, then the pool's next task in an
    epoch-wise shuffled order.

    Args:
        pools: pool name -> indices of its tasks (non-empty lists).
        weights: pool name -> weight (> 0; normalised here). With one pool no pool draw is
            made, so a plain run's order depends only on ``seed``.
        seed: the run seed.
        skip_after: dynamic sampling: skip a task whose group had zero reward variance on
            each of its last ``skip_after`` visits (0 = never skip).

    Raises:
        ValueError: no pools, an empty pool, or a weight <= 0.
    """

    def __init__(self, pools: dict[str, list[int]], weights: dict[str, float], seed: int,
                 skip_after: int = 0):
        if not pools or any(not v for v in pools.values()):
            raise ValueError("every sampling pool needs at least one task")
        if any(weights.get(name, 0) <= 0 for name in pools):
            raise ValueError(f"pool weights must be > 0: {weights}")
        total = sum(weights[name] for name in pools)
        self.pools, self.seed, self.skip_after = pools, seed, skip_after
        self.names = sorted(pools)
        self.weights = [weights[name] / total for name in self.names]
        self.draws = 0
        self.position = dict.fromkeys(self.names, 0)
        self.visits: dict[int, list[bool]] = {}
        self.counts: Counter = Counter()
        self.skipped = 0

    @classmethod
    def single(cls, n: int, seed: int, skip_after: int = 0) -> TaskSampler:
        """One pool of all ``n`` tasks."""
        return cls({"all": list(range(n))}, {"all": 1.0}, seed, skip_after)

    def _order(self, name: str, epoch: int) -> list[int]:
        order = list(self.pools[name])
        # the single-pool order is the one rlvr always used (seed * 7919 + epoch)
        rng = (random.Random(self.seed * 7919 + epoch) if len(self.names) == 1
               else random.Random(f"{self.seed}:{name}:{epoch}"))
        rng.shuffle(order)
        return order

    def _pool(self) -> str:
        if len(self.names) == 1:
            return self.names[0]
        rng = random.Random(f"{self.seed}:pool:{self.draws}")
        return rng.choices(self.names, self.weights)[0]

    def _draw(self) -> tuple[str, int]:
        name = self._pool()
        self.draws += 1
        epoch, i = divmod(self.position[name], len(self.pools[name]))
        self.position[name] += 1
        return name, self._order(name, epoch)[i]

    def _stale(self, index: int) -> bool:
        seen = self.visits.get(index, [])
        return bool(self.skip_after) and len(seen) >= self.skip_after and all(
            seen[-self.skip_after:])

    def next(self, k: int) -> list[int]:
        """The next ``k`` task indices. A task skipped by dynamic sampling is replaced by the
        next draw (counted in ``skipped``); when a whole pass finds nothing but stale tasks,
        stale ones are accepted rather than looping forever."""
        out: list[int] = []
        budget = 2 * sum(len(v) for v in self.pools.values()) + k
        while len(out) < k:
            name, index = self._draw()
            budget -= 1
            if self._stale(index) and budget > 0:
                self.skipped += 1
                continue
            out.append(index)
            self.counts[name] += 1
        return out

    def record(self, indices: list[int], zero_variance: list[bool]) -> None:
        """After a step: whether each drawn task's group had zero reward variance."""
        if not self.skip_after:
            return
        for index, zero in zip(indices, zero_variance):
            self.visits[index] = (self.visits.get(index, []) + [bool(zero)])[-self.skip_after:]

    def realised(self) -> dict[str, dict[str, float]]:
        """Per pool: target share and the share of draws actually taken from it (R26)."""
        total = sum(self.counts.values()) or 1
        return {name: {"target": w, "realised": self.counts[name] / total}
                for name, w in zip(self.names, self.weights)}

    def state_dict(self) -> dict:
        """JSON-serialisable state (checkpoints)."""
        return {"draws": self.draws, "position": dict(self.position),
                "visits": {str(k): v for k, v in self.visits.items()},
                "counts": dict(self.counts), "skipped": self.skipped}

    def load_state_dict(self, state: dict) -> None:
        self.draws, self.position = state["draws"], dict(state["position"])
        self.visits = {int(k): list(v) for k, v in state["visits"].items()}
        self.counts, self.skipped = Counter(state["counts"]), state["skipped"]


def sampling_tier(task, mode: str) -> str | None:
    """``task``'s sampling tier under ``data.tiers`` (``mode``): its ``difficulty`` when that
    is easy / medium / hard and (``measured``) was measured by ``rlvr data stratify`` (the
    task has a ``pass_rate``) or (``labels``) whatever its origin; else None."""
    if mode == "off" or task.difficulty not in TIERS:
        return None
    return task.difficulty if mode == "labels" or task.pass_rate is not None else None


def run_sampler(config, train_tasks: list, pool_of: list, log) -> TaskSampler:
    """A run's sampler: pools by mixture source (``pool_of``: each training task's source
    label, None for a single source) and tier (R24, R26; ``data.tiers``), weighted as
    configured. Logs through ``log`` where the tiers came from, their task counts and draw
    shares, and (``data.tiers: measured``) how many dataset difficulty labels were not used."""
    c, pools = config, {}
    weights = {(s.name or s.source): s.weight for s in c.data.sources}
    tiers = [sampling_tier(t, c.data.tiers) for t in train_tasks]
    tiered = any(tiers)
    ignored = sum(t.difficulty in TIERS and tier is None for t, tier in zip(train_tasks, tiers))
    if ignored and c.data.tiers == "measured":
        log(f"data.tiers: {ignored} training tasks carry a difficulty label "
            f"(easy / medium / hard) without a measured pass_rate: not used as "
            f"sampling tiers (measure them with `rlvr data stratify`, or set "
            f"data.tiers: labels to draw by the dataset's labels)")
    for i, (tier, label) in enumerate(zip(tiers, pool_of)):
        pools.setdefault((label, (tier or "medium") if tiered else None), []).append(i)
    if len(pools) == 1:
        return TaskSampler.single(len(train_tasks), c.seed, c.grpo.filter_groups_after)
    named, w, tier_of = {}, {}, {}
    for (label, tier), idx in pools.items():
        name = "/".join(x for x in (label, tier) if x)
        present = [t for (lb, t) in pools if lb == label]
        tier_w = (c.data.tier_weights.get(tier, 0.0) / sum(c.data.tier_weights.get(t, 0.0)
                                                           for t in present)) if tier else 1.0
        if tier_w > 0:
            named[name], w[name] = idx, weights.get(label, 1.0) * tier_w
            tier_of[name] = tier
    if tiered:
        origin = ("measured by `rlvr data stratify`" if c.data.tiers == "measured"
                  else "the dataset's difficulty labels, data.tiers: labels")
        total = sum(w.values())
        counts = {t: sum(len(idx) for (_, tier), idx in pools.items() if tier == t)
                  for t in TIERS}
        shares = {t: sum(v for n, v in w.items() if tier_of[n] == t) / total for t in TIERS}
        untiered = sum(tier is None for tier in tiers)
        log(f"data tiers ({origin}): " + ", ".join(
            f"{t} {counts[t]} tasks drawn {shares[t]:.0%}" for t in TIERS)
            + " (data.tier_weights" + (f"; {untiered} tasks without a tier count as medium"
                                       if untiered else "") + ")")
    return TaskSampler(named, w, c.seed, c.grpo.filter_groups_after)


def sampling_metrics(sampler: TaskSampler, skipped_before: int, counts_before: dict) -> dict:
    """This step's dynamic-sampling skips and, with several pools, prompts drawn per pool."""
    out = {"data/skipped": float(sampler.skipped - skipped_before)}
    if len(sampler.names) > 1:
        for name in sampler.names:
            out[f"data/pool/{name}"] = float(sampler.counts[name] - counts_before.get(name, 0))
    return out
