"""The sampling fields of a request that change the logits before a token is drawn, applied in
vLLM's order through the engine's :meth:`~rlvr.rollout.hooks.DecodeHooks.process_logits`:

1. ``allowed_token_ids``: every other token gets ``-inf``;
2. ``min_tokens``: the stop tokens (end of sequence unless ``ignore_eos``, and
   ``stop_token_ids``) get ``-inf`` while a row has fewer than ``min_tokens`` tokens;
3. ``logit_bias``: ``{token id: bias}`` added (bias in [-100, 100]);
4. ``bad_words``: a word's last token gets ``-inf`` when the row's tokens end with the
   word's other tokens (each word with and without a leading space);
5. ``repetition_penalty`` r (CTRL, Keskar et al. 2019, as transformers and vLLM apply it):
   the logit l of a token seen in the prompt or the completion becomes ``l / r`` if l > 0
   else ``l * r``;
6. ``frequency_penalty`` f and ``presence_penalty`` p (OpenAI's formula): ``l - f * c -
   p * (c > 0)`` with c the token's count in the completion so far;
7. ``min_p`` m: after the temperature, tokens whose probability is below ``m`` times the
   most likely token's get ``-inf``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor


@dataclass
class LogitsRules:
    """A request's logits rules (see the module doc); rows are engine output rows,
    ``prompts[row // n]`` their prompt.

    Attributes:
        n: samples per prompt.
        prompts: the request's prompts (token ids).
        allowed: allowed token ids, or None (all).
        stop_ids: the ids ``min_tokens`` holds back.
        min_tokens: tokens a row must have before a stop token may be drawn.
        bias: ``{token id: bias}``.
        bad_words: token sequences that must not be completed.
        repetition_penalty, frequency_penalty, presence_penalty, min_p: as in the module doc.
        temperature: the request's (``min_p`` is taken after it; 0: greedy, no ``min_p``).
    """

    n: int
    prompts: list[list[int]]
    allowed: list[int] | None = None
    stop_ids: tuple[int, ...] = ()
    min_tokens: int = 0
    bias: dict[int, float] = field(default_factory=dict)
    bad_words: list[list[int]] = field(default_factory=list)
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    min_p: float = 0.0
    temperature: float = 1.0

    @property
    def active(self) -> bool:
        """True when any rule changes the logits."""
        return bool(self.allowed is not None or (self.min_tokens and self.stop_ids)
                    or self.bias or self.bad_words or self.repetition_penalty != 1.0
                    or self.frequency_penalty or self.presence_penalty
                    or (self.min_p > 0 and self.temperature > 0))

    def apply(self, rows: Tensor, logits: Tensor, generated: Sequence[list[int]]) -> Tensor:
        """The logits of ``rows`` (FloatTensor[R, V]) after the rules; ``generated[row]`` is
        the row's completion so far. Returns a new fp32 tensor."""
        out = logits.float().clone()
        vocab = out.shape[-1]
        if self.allowed is not None:
            keep = torch.zeros(vocab, dtype=torch.bool)
            keep[[t for t in self.allowed if t < vocab]] = True
            out[:, ~keep] = -torch.inf
        for slot, row in enumerate(rows.tolist()):
            done = generated[row]
            line = out[slot]
            if len(done) < self.min_tokens and self.stop_ids:
                line[[t for t in self.stop_ids if t < vocab]] = -torch.inf
            for token, bias in self.bias.items():
                if token < vocab:
                    line[token] += bias
            for word in self.bad_words:
                head = word[:-1]
                if len(done) >= len(head) and (not head or done[-len(head):] == head):
                    line[word[-1]] = -torch.inf
            if self.repetition_penalty != 1.0:
                seen = torch.tensor(sorted(set(self.prompts[row // self.n]) | set(done)),
                                    dtype=torch.long)
                values = line[seen]
                line[seen] = torch.where(values > 0, values / self.repetition_penalty,
                                         values * self.repetition_penalty)
            if (self.frequency_penalty or self.presence_penalty) and done:
                ids, counts = torch.tensor(done).unique(return_counts=True)
                line[ids] -= self.frequency_penalty * counts.float() + self.presence_penalty
        if self.min_p > 0 and self.temperature > 0:
            probs = torch.softmax(out / self.temperature, dim=-1)
            cut = probs < self.min_p * probs.max(dim=-1, keepdim=True).values
            out = out.masked_fill(cut, -torch.inf)
        return out
