"""Log-probs of a prompt's own tokens, for vLLM's ``prompt_logprobs`` and the completions
API's ``echo`` with ``logprobs`` (what lm-evaluation-harness reads for loglikelihood tasks).

Position i >= 1 holds ``log_softmax(logits[i - 1])[prompt[i]]`` under the model's raw
distribution (temperature 1, fp32 log-softmax over one forward pass of the served model);
position 0 has no context and holds None, as in vLLM and OpenAI's legacy API.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from rlvr.serve.logprobs import TokenNames, json_logprob


@dataclass
class PromptScores:
    """One prompt's scores: per position i >= 1 the token's log-prob, its rank (1 + the
    number of tokens more likely) and the k most likely ``(id, log-prob)``."""

    ids: list[int]
    logprobs: list[float | None]
    ranks: list[int | None]
    tops: list[list[tuple[int, float]] | None]


@torch.no_grad()
def score_prompt(model, ids: Sequence[int], k: int) -> PromptScores:
    """Score ``ids`` (one prompt) with ``model`` (a transformers causal LM) and keep the top
    ``k`` (>= 0) of every position."""
    ids = list(ids)
    if len(ids) < 2:
        return PromptScores(ids, [None] * len(ids), [None] * len(ids), [None] * len(ids))
    was_training = model.training
    model.eval()
    try:
        logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
    finally:
        model.train(was_training)
    target = torch.tensor(ids[1:])
    dist = torch.log_softmax(logits, dim=-1)
    # the token's value from the same distribution its rank and the top k are read from
    values = dist.gather(-1, target.unsqueeze(1)).squeeze(1)
    ranks = (dist > values.unsqueeze(1)).sum(1) + 1
    tops: list = [None]
    if k:
        top_values, top_ids = dist.topk(min(k, dist.shape[-1]), dim=-1)
        tops += [list(zip(i, v)) for i, v in zip(top_ids.tolist(), top_values.tolist())]
    else:
        tops += [[] for _ in ids[1:]]
    return PromptScores(ids, [None] + values.tolist(), [None] + ranks.tolist(), tops)


def vllm_prompt_logprobs(scores: PromptScores, names: TokenNames) -> list[Any]:
    """vLLM's ``prompt_logprobs``: per position None (the first) or ``{token id: {"logprob",
    "rank", "decoded_token"}}`` holding the prompt's token and the k most likely."""
    out: list[Any] = [None]
    for i in range(1, len(scores.ids)):
        token = scores.ids[i]
        entry = {str(token): {"logprob": json_logprob(scores.logprobs[i]),
                              "rank": scores.ranks[i], "decoded_token": names(token)}}
        for rank, (other, value) in enumerate(scores.tops[i], start=1):
            entry.setdefault(str(other), {"logprob": json_logprob(value), "rank": rank,
                                          "decoded_token": names(other)})
        out.append(entry)
    return out


def echo_logprobs(scores: PromptScores, names: TokenNames, token_text) -> dict[str, list]:
    """The prompt part of a completions ``logprobs`` object under ``echo``: ``tokens``,
    ``token_logprobs`` (None first), ``top_logprobs`` (None first; the k most likely and the
    prompt's token) and ``text_offset`` (each token's start in the decoded prompt, from
    ``token_text(id)``)."""
    out: dict[str, list] = {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                            "text_offset": []}
    offset = 0
    for i, token in enumerate(scores.ids):
        name = names(token)
        out["tokens"].append(name)
        out["text_offset"].append(offset)
        offset += len(token_text(token))
        if i == 0:
            out["token_logprobs"].append(None)
            out["top_logprobs"].append(None)
            continue
        value = json_logprob(scores.logprobs[i])
        top = {names(t): json_logprob(v) for t, v in scores.tops[i]}
        top.setdefault(name, value)
        out["token_logprobs"].append(value)
        out["top_logprobs"].append(top)
    return out
