"""One request's decoding, step by step: :class:`RequestRun` is the
:class:`rlvr.rollout.hooks.DecodeHooks` ``rlvr serve`` hands the engine. At every step it

- applies the request's :class:`~rlvr.serve.logits_rules.LogitsRules`;
- appends each row's token and its reported log-prob: raw, ``log_softmax(logits)`` of the
  model's logits, or tempered, the engine's own record (``RolloutOutput.logprobs``); the
  top-k from :func:`rlvr.rollout.reported_logprobs.report_distribution`;
- detokenizes incrementally: the text released so far never ends inside a multi-byte
  character (U+FFFD) or with the beginning of a stop string, so a streamed piece is never
  taken back;
- ends a row on a stop token (finish ``stop``; its text is left out unless
  ``include_stop_str_in_output``), on a stop string (the text is cut before it, or after it
  with ``include_stop_str_in_output``; stop strings count from ``min_tokens`` on, as in
  vLLM), or at ``max_tokens`` (``length``), and tells the engine to stop decoding it;
- ends every row once the request is cancelled (its client went away);
- hands the new pieces to ``emit`` (streaming).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from rlvr.rollout import SamplingParams
from rlvr.rollout.reported_logprobs import report_distribution
from rlvr.serve.logits_rules import LogitsRules
from rlvr.serve.schemas import Choice

# (row, token index, the row finished with this token)
Delta = tuple[int, int, bool]


@dataclass
class RowState:
    """The decoding state of one output row (see :class:`rlvr.serve.schemas.Choice`)."""

    ids: list[int] = field(default_factory=list)
    text: str = ""  # released text, "".join(pieces)
    full: str = ""  # the text of all ids at the last step
    pieces: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    tops: list[list[tuple[int, float]]] = field(default_factory=list)
    finish: str | None = None
    stop_reason: int | str | None = None


def held_back(text: str, stops: Sequence[str]) -> int:
    """Length of the longest end of ``text`` that begins a stop string (shorter than it)."""
    best = 0
    for stop in stops:
        for k in range(min(len(stop) - 1, len(text)), best, -1):
            if text.endswith(stop[:k]):
                best = k
                break
    return best


class RequestRun:
    """Decoding hooks and per-row state of one request.

    Args:
        rows: output rows (prompts x n).
        n: samples per prompt.
        max_new: ``max_tokens``.
        stop_ids: token ids that end a row (the engine's ``stop_token_ids``).
        eos_ids: the model's end-of-sequence ids among them (``stop_reason`` None).
        stops: stop strings.
        include_stop: ``include_stop_str_in_output``.
        min_tokens: stop strings count from this many tokens on.
        decode: ``decode(ids) -> str`` (``skip_special_tokens`` applied).
        report: the request's :class:`SamplingParams` when log-probs are reported (its
            ``raw_logprobs`` and ``top_logprobs`` say how), else None.
        rules: the logits rules, or None.
        emit: called from the engine's thread with each step's list of :data:`Delta`.
    """

    def __init__(self, rows: int, *, n: int, max_new: int, stop_ids: Sequence[int],
                 eos_ids: Sequence[int], stops: Sequence[str], include_stop: bool,
                 min_tokens: int, decode: Callable[[Sequence[int]], str],
                 report: SamplingParams | None = None, rules: LogitsRules | None = None,
                 emit: Callable[[list[Delta]], None] | None = None):
        self.rows = [RowState() for _ in range(rows)]
        self.n, self.max_new = n, max_new
        self.stop_ids, self.eos_ids = set(stop_ids), set(eos_ids)
        self.stops, self.include_stop, self.min_tokens = list(stops), include_stop, min_tokens
        self.decode, self.report, self.emit = decode, report, emit
        self.rules = rules if rules is not None and rules.active else None
        self._cancelled = threading.Event()
        self.first_step_at: float | None = None  # time.perf_counter() of the first token

    # -- control ------------------------------------------------------------------------------

    def cancel(self) -> None:
        """End every row at the next step (the client went away)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancelled.is_set()

    # -- DecodeHooks --------------------------------------------------------------------------

    def process_logits(self, rows: Tensor, step: int, logits: Tensor) -> Tensor:
        """The logits after the request's :class:`LogitsRules` (unchanged without any)."""
        if self.rules is None:
            return logits
        return self.rules.apply(rows, logits, [state.ids for state in self.rows])

    def on_step(self, rows: Tensor, step: int, tokens: Tensor, logprobs: Tensor,
                logits: Tensor) -> Tensor | None:
        """Record the step's tokens (see the module doc); True for rows that end here."""
        if self.first_step_at is None:
            self.first_step_at = time.perf_counter()
        values, top_ids, top_values = self._reported(tokens, logprobs, logits)
        ended, deltas = [], []
        for slot, (row, token) in enumerate(zip(rows.tolist(), tokens.tolist())):
            state = self.rows[row]
            if state.finish is not None:
                ended.append(True)
                continue
            state.ids.append(token)
            if values is not None:
                state.logprobs.append(values[slot])
                state.tops.append(list(zip(top_ids[slot], top_values[slot]))
                                  if top_ids is not None else [])
            done = self._advance(state, token)
            deltas.append((row, len(state.ids) - 1, done))
            ended.append(done or self.cancelled)
        if self.emit is not None and deltas:
            self.emit(deltas)
        return torch.tensor(ended, dtype=torch.bool)

    # -- results ------------------------------------------------------------------------------

    def finalize(self) -> list[Delta]:
        """End the rows the engine left unfinished (cancelled: ``length``, their whole text
        released); returns their last deltas (none for a row without tokens)."""
        deltas = []
        for row, state in enumerate(self.rows):
            if state.finish is None:
                self._finish(state, "length", None, self.decode(state.ids) if state.ids else "")
                if state.ids:
                    deltas.append((row, len(state.ids) - 1, True))
        return deltas

    def choices(self) -> list[Choice]:
        """One :class:`Choice` per row (call :meth:`finalize` first)."""
        out = []
        for row, state in enumerate(self.rows):
            out.append(Choice(state.text, state.finish or "length", list(state.ids),
                              prompt_index=row // self.n, pieces=list(state.pieces),
                              logprobs=list(state.logprobs) if self.report else None,
                              top_logprobs=list(state.tops) if self.report else None,
                              stop_reason=state.stop_reason))
        return out

    # -- helpers ------------------------------------------------------------------------------

    def _reported(self, tokens: Tensor, logprobs: Tensor, logits: Tensor):
        if self.report is None:
            return None, None, None
        dist = report_distribution(logits, self.report)
        if self.report.raw_logprobs:
            values = dist.gather(1, tokens.unsqueeze(1)).squeeze(1).tolist()
        else:  # tempered: the engine's own record (after the logits rules)
            values = logprobs.tolist()
        k = min(self.report.top_logprobs, dist.shape[-1])
        if k == 0:
            return values, None, None
        top_values, top_ids = dist.topk(k, dim=-1)
        return values, top_ids.tolist(), top_values.tolist()

    def _advance(self, state: RowState, token: int) -> bool:
        """Add ``token``'s text to ``state``; True when the row ends with it."""
        if token in self.stop_ids:
            reason = None if token in self.eos_ids else token
            final = self.decode(state.ids if self.include_stop else state.ids[:-1])
            return self._finish(state, "stop", reason, final)
        previous, state.full = state.full, self.decode(state.ids)
        full = state.full
        if self.stops and len(state.ids) >= self.min_tokens:
            hit = None
            for stop in self.stops:  # only stop strings ending in the new text
                at = full.find(stop, max(0, min(len(previous), len(full)) - len(stop) + 1))
                if at >= 0 and (hit is None or at < hit[0]):
                    hit = (at, stop)
            if hit is not None:
                cut = hit[0] + (len(hit[1]) if self.include_stop else 0)
                return self._finish(state, "stop", hit[1], full[:cut])
        if len(state.ids) >= self.max_new:
            return self._finish(state, "length", None, full)
        ready = full.rstrip("\ufffd")
        if self.stops:
            ready = ready[:len(ready) - held_back(ready, self.stops)]
        self._release(state, ready)
        return False

    @staticmethod
    def _release(state: RowState, ready: str) -> None:
        piece = ready[len(state.text):] if ready.startswith(state.text) else ""
        state.text += piece
        if not state.ids:
            return
        if len(state.pieces) < len(state.ids):
            state.pieces.append(piece)
        elif state.pieces:
            state.pieces[-1] += piece
        else:
            state.pieces.append(piece)

    def _finish(self, state: RowState, finish: str, reason, final: str) -> bool:
        self._release(state, final)
        state.finish, state.stop_reason = finish, reason
        return True
