"""Multi-turn episodes in one decode loop of the ``torch`` engine ("the KV cache
continues across turns"): :meth:`TorchEngine.play_episodes
<rlvr.rollout.torch_engine.TorchEngine.play_episodes>`.

Each bucket of task prompts is prefilled once, shared by the G episodes of a task (the
engine's shared-prefix cache), and then every live row takes one token per decode step: a
token it samples, or, right after its turn ended, the next of the ids the environment inserted
(the observation in the chat template, then the next assistant header). Those inserted ids go
through the same decode step as sampled ones, so their keys / values land in the row's cache
and the row's next turn continues from there; nothing is re-prefilled. Rows whose turns end at
the same step are answered by one environment call (the book's ``end_turns``).

Compared with turn-synchronous rounds through ``generate`` (which re-prefill every episode's
prompt and ids so far at each turn, once per episode), the prompt is computed once per task
and each inserted id costs one decode step of its row. The sampled tokens follow the same
distribution; the random stream differs (one seeded generator for the whole call, one uniform
per live row and step, forced rows included), so a seed gives other, equally reproducible
episodes.

The ``book`` is any object with the methods of :class:`rlvr.envs.episodes.EpisodeBook`
(``turn_cap(row)``, ``capacity_hint()``, ``end_turns(rows, sampled, logps, finishes)``):
the rollout layer does not import the environment layer.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence

import torch
from torch import Tensor

from rlvr.rollout.decoder.caches import KVCache
from rlvr.rollout.engine import left_pad
from rlvr.rollout.sampling import sample_next
from rlvr.rollout.types import RolloutTiming, SamplingParams


class _Rows:
    """Per-row decode state of one bucket, indexed by output row (= episode index)."""

    def __init__(self, rows: list[int], book):
        self.turn: dict[int, list[int]] = {r: [] for r in rows}  # sampled this turn
        self.turn_logps: dict[int, list[float]] = {r: [] for r in rows}
        self.cap = {r: book.turn_cap(r) for r in rows}
        self.queue: dict[int, deque] = {r: deque() for r in rows}  # inserted ids to feed


def play_bucket(engine, decoder, prompts: list[list[int]], prompt_rows: Sequence[int],
                params: SamplingParams, book, generator: torch.Generator,
                timing: RolloutTiming) -> None:
    """Play the episodes of one bucket of prompts to their end.

    Args:
        engine: the :class:`~rlvr.rollout.torch_engine.TorchEngine` (its cache factory, pad id,
            compaction fraction).
        decoder: its :class:`~rlvr.rollout.decoder.forward.Decoder`.
        prompts: the bucket's task prompts; ``prompt_rows[b]`` is prompt b's task index, whose
            G = ``params.n`` episodes are output rows ``index * G .. index * G + G - 1``.
        params: sampling parameters (``max_new_tokens`` per turn is the book's ``turn_cap``).
        book: the episodes' :class:`~rlvr.envs.episodes.EpisodeBook`.
        generator: the call's seeded generator (one uniform per live row and step).
        timing: prefill / decode seconds and sampled tokens are added to it.
    """
    n = params.n
    start = time.perf_counter()
    ids, mask = left_pad(prompts, engine.pad_token_id)
    width = ids.shape[1]
    room = max(book.capacity_hint(), 2)  # the cache holds room - 1 completion columns
    cache = engine.new_cache(decoder, len(prompts), n, width, room, mask)
    logits = decoder.prefill(ids, mask, cache, n).repeat_interleave(n, dim=0)
    slots = (torch.tensor(list(prompt_rows)).unsqueeze(1) * n + torch.arange(n)).flatten()
    done = torch.zeros(slots.numel(), dtype=torch.bool)
    prompt_mask = mask.repeat_interleave(n, dim=0)
    positions = mask.sum(1).repeat_interleave(n)
    state = _Rows(slots.tolist(), book)
    timing.prefill_seconds += time.perf_counter() - start
    start = time.perf_counter()
    # only the n-fold KVCache reads a key mask (the shared-prefix caches keep prompt padding
    # themselves), and it needs one only when prompts are padded
    masked, column = isinstance(cache, KVCache) and not bool(mask.all()), width - 1
    while True:
        sampled, logps = sample_next(logits, params, generator, decoder.library)
        tokens = _advance(slots.tolist(), done, sampled, logps, state, book, params, timing)
        if bool(done.all()):
            break
        if int(done.sum()) >= engine.compact_fraction * slots.numel():
            keep = (~done).nonzero().squeeze(1)
            cache.compact(keep, column + 1)
            slots, done, tokens = slots[keep], done[keep], tokens[keep]
            positions, prompt_mask = positions[keep], prompt_mask[keep]
        column += 1
        if column - width >= room - 1:  # an episode outgrew the estimate: double the cache
            cache.grow(room)
            room *= 2
        key_mask = None
        if masked:
            rest = torch.ones(slots.numel(), column + 1 - width, dtype=torch.bool)
            key_mask = torch.cat([prompt_mask, rest], dim=1)
        logits = decoder.step(tokens, positions, column, key_mask, cache)
        positions = positions + 1
    timing.decode_seconds += time.perf_counter() - start


def _advance(slots: list[int], done: Tensor, sampled: Tensor, logps: Tensor, state: _Rows,
             book, params: SamplingParams, timing: RolloutTiming) -> Tensor:
    """The next token each slot feeds: the next inserted id of a row whose queue holds some,
    else the token it just sampled (recorded in its turn). Turns that end (a stop token, or
    the turn's cap) go to the book together; a row whose episode ended is marked in ``done``
    (in place). Returns LongTensor[R]."""
    tokens = sampled.clone()
    drawn, drawn_logps = sampled.tolist(), logps.tolist()
    stop = params.stop_token_ids
    ended: list[tuple[int, int, str]] = []
    for s, row in enumerate(slots):
        if done[s]:
            continue
        queue = state.queue[row]
        if queue:
            tokens[s] = queue.popleft()
            continue
        token = drawn[s]
        state.turn[row].append(token)
        state.turn_logps[row].append(drawn_logps[s])
        timing.tokens_generated += 1
        if token in stop:
            ended.append((s, row, "stop"))
        elif len(state.turn[row]) >= state.cap[row]:
            ended.append((s, row, "length"))
    if not ended:
        return tokens
    inserted = book.end_turns([row for _, row, _ in ended],
                              [state.turn[row] for _, row, _ in ended],
                              [state.turn_logps[row] for _, row, _ in ended],
                              [finish for _, _, finish in ended])
    for (s, row, _), ids in zip(ended, inserted):
        state.turn[row], state.turn_logps[row] = [], []
        if ids is None:
            done[s] = True
        else:  # the row feeds its last sampled token, then these ids, then samples again
            state.queue[row] = deque(ids)
            state.cap[row] = book.turn_cap(row)
    return tokens
