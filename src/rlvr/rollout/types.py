"""Records of the rollout engines: what to sample (:class:`SamplingParams`) and what came back
(:class:`RolloutOutput`).

Conventions shared by every engine:

- Rows: ``N = len(prompts) * params.n``. The ``n`` samples of prompt ``i`` are rows
  ``i*n .. i*n + n - 1`` (contiguous), and ``prompt_index[row] == row // n``.
- Completions are right-padded to ``T = max(lengths)`` with the engine's pad id;
  ``completion_mask`` is True on real tokens. A stop token that ended a row is part of the
  completion (masked True): the policy is trained to emit it.
- ``logprobs[r, t]`` is ``log_softmax(logits / temperature)[token]`` of the sampled token under
  the *tempered, untruncated* policy: top-p / top-k restrict which tokens can be drawn but do
  not renormalise the recorded value. That is log pi_old of the policy at the training
  temperature, which GRPO's ratio needs (the trainer recomputes log pi_theta with the same
  temperature). With ``temperature == 0`` (greedy) it is ``log_softmax(logits)`` (T = 1).
  Padding positions hold 0.0.
- Reported log-probs (for ``rlvr serve``; off by default, the trainer never asks for them):
  ``SamplingParams.top_logprobs = k`` adds the k most likely tokens of every sampled position
  and their log-probs (``top_token_ids`` / ``top_logprobs``, [N, T, k]);
  ``SamplingParams.raw_logprobs`` adds ``raw_logprobs`` [N, T], the sampled token under the
  *raw* model distribution ``log_softmax(logits)`` (temperature 1, no truncation: what vLLM
  reports by default), and makes the top-k values raw too (else they are tempered, like
  ``logprobs``). Computed from the same logits as ``logprobs``
  (:mod:`rlvr.rollout.reported_logprobs`); sampling itself is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import Tensor

FINISH_STOP = "stop"
FINISH_LENGTH = "length"


class SamplingParamsError(ValueError):
    """A sampling parameter is out of range; the message names the field."""


def _check(condition: bool, name: str, message: str, value) -> None:
    if not condition:
        raise SamplingParamsError(f"SamplingParams.{name} {message}, got {value!r}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SamplingParams:
    """How to sample completions.

    Attributes:
        temperature: softmax temperature, >= 0; 0 means greedy (argmax, no randomness).
        top_p: nucleus mass in (0, 1]; 1 disables it. Keeps the smallest set of most likely
            tokens whose tempered probability sums to >= top_p.
        top_k: keep the k most likely tokens; 0 (or >= vocabulary size) disables it.
        max_new_tokens: completion length cap in tokens, >= 1.
        stop_token_ids: token ids that end a completion (included in it, finish reason
            ``"stop"``). Empty: only ``max_new_tokens`` ends a completion.
        n: samples per prompt (GRPO's group size G), >= 1.
        seed: seed of the engine's own ``torch.Generator``; same seed, same prompts, same
            weights and same engine settings give the same completions. ``None``: draw a seed
            from torch's global generator (reproducible under ``torch.manual_seed``).
        top_logprobs: also report the k most likely tokens of every sampled position and
            their log-probs (``RolloutOutput.top_token_ids`` / ``top_logprobs``), k >= 0;
            0 (default) reports none.
        raw_logprobs: also report ``RolloutOutput.raw_logprobs`` (the sampled tokens under
            ``log_softmax(logits)``, temperature 1) and make the top-k values raw; False
            (default): top-k values are tempered like ``logprobs``.

    Raises:
        SamplingParamsError: at construction, naming the first invalid field.
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 128
    stop_token_ids: tuple[int, ...] = ()
    n: int = 1
    seed: int | None = None
    top_logprobs: int = 0
    raw_logprobs: bool = False

    def __post_init__(self) -> None:
        t = self.temperature
        _check(isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)
               and t >= 0, "temperature", "must be a finite number >= 0", t)
        p = self.top_p
        _check(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 < p <= 1,
               "top_p", "must be in (0, 1]", p)
        _check(_is_int(self.top_k) and self.top_k >= 0, "top_k", "must be an int >= 0", self.top_k)
        _check(_is_int(self.max_new_tokens) and self.max_new_tokens >= 1, "max_new_tokens",
               "must be an int >= 1", self.max_new_tokens)
        _check(_is_int(self.n) and self.n >= 1, "n", "must be an int >= 1", self.n)
        _check(self.seed is None or _is_int(self.seed), "seed", "must be an int or None",
               self.seed)
        _check(_is_int(self.top_logprobs) and self.top_logprobs >= 0, "top_logprobs",
               "must be an int >= 0", self.top_logprobs)
        _check(isinstance(self.raw_logprobs, bool), "raw_logprobs", "must be a bool",
               self.raw_logprobs)
        stops = self.stop_token_ids
        if isinstance(stops, int) and not isinstance(stops, bool):
            stops = (stops,)
        _check(isinstance(stops, (list, tuple, set, frozenset))
               and all(_is_int(s) and s >= 0 for s in stops),
               "stop_token_ids", "must be a sequence of ints >= 0", self.stop_token_ids)
        object.__setattr__(self, "stop_token_ids", tuple(sorted(set(stops))))

    @property
    def greedy(self) -> bool:
        """True when ``temperature == 0`` (argmax decoding)."""
        return self.temperature == 0

    @property
    def reports_logprobs(self) -> bool:
        """True when the engine must record reported log-probs (top-k or raw)."""
        return self.top_logprobs > 0 or self.raw_logprobs

    def resolved_seed(self) -> int:
        """``seed``, or one drawn from torch's global generator when ``seed`` is None."""
        if self.seed is not None:
            return self.seed
        return int(torch.randint(0, 2**62, (1,)).item())


@dataclass
class RolloutTiming:
    """Wall-clock split of one ``generate`` call.

    Attributes:
        prefill_seconds: prompt processing (seconds), including the first token's sampling.
        decode_seconds: token-by-token generation after the first token (seconds).
        logprob_seconds: an extra pass that computes the sampling log-probs, for engines whose
            generation does not return them (``hf``: a teacher-forced forward; seconds).
        tokens_generated: completion tokens produced (sum of ``lengths``).
    """

    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    tokens_generated: int = 0
    logprob_seconds: float = 0.0

    @property
    def total_seconds(self) -> float:
        """prefill + decode + log-prob pass (seconds): the whole ``generate`` call."""
        return self.prefill_seconds + self.decode_seconds + self.logprob_seconds

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per second of total time (0.0 when nothing was timed)."""
        total = self.total_seconds
        return self.tokens_generated / total if total > 0 else 0.0


@dataclass
class RolloutOutput:
    """Completions of one ``generate`` call (see the module doc for conventions).

    Attributes:
        completion_ids: LongTensor[N, T], right-padded with ``pad_token_id``.
        completion_mask: BoolTensor[N, T], True on generated tokens (stop token included).
        logprobs: FloatTensor[N, T] (fp32), log-prob of each sampled token under
            ``log_softmax(logits / temperature)`` (no top-p / top-k renormalisation); 0 on padding.
        prompt_index: LongTensor[N], the prompt each row came from (rows of one prompt are
            contiguous, ``n`` per prompt).
        finish_reason: list of N strings, ``"stop"`` (a stop token was sampled) or ``"length"``
            (``max_new_tokens`` reached).
        lengths: LongTensor[N], completion lengths in tokens (= ``completion_mask.sum(1)``).
        timing: wall-clock seconds and token count.
        pad_token_id: the id used for padding.
        raw_logprobs: FloatTensor[N, T] ``log_softmax(logits)[token]`` (temperature 1), when
            ``SamplingParams.raw_logprobs``; else None. 0 on padding.
        top_token_ids: LongTensor[N, T, k] the k most likely tokens of each position, most
            likely first, when ``SamplingParams.top_logprobs = k > 0``; else None.
        top_logprobs: FloatTensor[N, T, k] their log-probs (raw or tempered, see
            ``SamplingParams.raw_logprobs``); else None. 0 on padding.
        loss_mask: BoolTensor[N, T], True on the tokens the policy loss, KL, entropy and length
            statistics count: the assistant's sampled tokens. Default (``None`` given) is
            ``completion_mask`` (single-turn: every completion token is sampled); a multi-turn
            episode's inserted observation tokens are in ``completion_mask`` but not here.
    """

    completion_ids: Tensor
    completion_mask: Tensor
    logprobs: Tensor
    prompt_index: Tensor
    finish_reason: list[str]
    lengths: Tensor
    timing: RolloutTiming = field(default_factory=RolloutTiming)
    pad_token_id: int = 0
    raw_logprobs: Tensor | None = None
    top_token_ids: Tensor | None = None
    top_logprobs: Tensor | None = None
    loss_mask: Tensor | None = None

    def __post_init__(self) -> None:
        n = self.completion_ids.shape[0]
        if self.loss_mask is None:
            self.loss_mask = self.completion_mask
        shapes = {"completion_mask": self.completion_mask, "logprobs": self.logprobs,
                  "raw_logprobs": self.raw_logprobs, "loss_mask": self.loss_mask}
        for name, tensor in shapes.items():
            if tensor is not None and tuple(tensor.shape) != tuple(self.completion_ids.shape):
                raise ValueError(f"RolloutOutput.{name} has shape {list(tensor.shape)}, "
                                 f"expected {list(self.completion_ids.shape)}")
        if (self.top_token_ids is None) != (self.top_logprobs is None):
            raise ValueError("RolloutOutput.top_token_ids and top_logprobs come together")
        for name in ("top_token_ids", "top_logprobs"):
            tensor = getattr(self, name)
            if tensor is not None and (tensor.dim() != 3 or tuple(tensor.shape[:2]) != tuple(
                    self.completion_ids.shape)):
                raise ValueError(f"RolloutOutput.{name} has shape {list(tensor.shape)}, "
                                 f"expected {list(self.completion_ids.shape)} + [k]")
        if bool((self.loss_mask & ~self.completion_mask).any()):
            raise ValueError("RolloutOutput.loss_mask is True outside completion_mask")
        if self.prompt_index.shape != (n,) or self.lengths.shape != (n,):
            raise ValueError(f"RolloutOutput.prompt_index / lengths must have shape [{n}]")
        if len(self.finish_reason) != n:
            raise ValueError(f"RolloutOutput.finish_reason has {len(self.finish_reason)} "
                             f"entries, expected {n}")

    @property
    def num_rows(self) -> int:
        """N, the number of completions."""
        return self.completion_ids.shape[0]

    def completion(self, row: int) -> list[int]:
        """Token ids of one completion without padding."""
        return self.completion_ids[row, : int(self.lengths[row])].tolist()


def _pad_cat(tensors: list[Tensor], width: int, value) -> Tensor:
    return torch.cat([torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)
                      if t.dim() == 2 else torch.nn.functional.pad(
                          t, (0, 0, 0, width - t.shape[1]), value=value) for t in tensors])


def concat_rollouts(parts: list[RolloutOutput], prompt_counts: list[int]) -> RolloutOutput:
    """Several ``generate`` calls' outputs as one, prompts numbered on: the rows of part j
    follow part j - 1's, and its ``prompt_index`` is shifted by the prompts before it (DAPO's
    dynamic sampling adds rounds of prompts to a step).

    Args:
        parts: the outputs, in order (same ``pad_token_id``; reported log-probs in all or none).
        prompt_counts: the number of prompts each part was called with.

    Returns:
        A :class:`RolloutOutput` with ``sum(N_j)`` rows and width ``max(T_j)`` (shorter parts
        right-padded); timing summed.

    Raises:
        ValueError: no parts, or ``prompt_counts`` of another length.
    """
    if not parts or len(parts) != len(prompt_counts):
        raise ValueError(f"concat_rollouts: {len(parts)} parts, {len(prompt_counts)} counts")
    if len(parts) == 1:
        return parts[0]
    width, pad = max(p.completion_ids.shape[1] for p in parts), parts[0].pad_token_id
    offsets = [sum(prompt_counts[:j]) for j in range(len(parts))]

    def cat(name: str, value):
        tensors = [getattr(p, name) for p in parts]
        return None if tensors[0] is None else _pad_cat(tensors, width, value)

    timing = RolloutTiming(*(sum(getattr(p.timing, f) for p in parts) for f in (
        "prefill_seconds", "decode_seconds", "tokens_generated", "logprob_seconds")))
    return RolloutOutput(
        completion_ids=cat("completion_ids", pad), completion_mask=cat("completion_mask", False),
        logprobs=cat("logprobs", 0.0),
        prompt_index=torch.cat([p.prompt_index + o for p, o in zip(parts, offsets)]),
        finish_reason=[r for p in parts for r in p.finish_reason],
        lengths=torch.cat([p.lengths for p in parts]), timing=timing, pad_token_id=pad,
        raw_logprobs=cat("raw_logprobs", 0.0), top_token_ids=cat("top_token_ids", pad),
        top_logprobs=cat("top_logprobs", 0.0), loss_mask=cat("loss_mask", False))
