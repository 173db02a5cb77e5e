"""SFT cold start (R17): supervised fine-tuning on verified worked solutions.

Only solutions whose final answer the reward pipeline verifies as correct are used; the
others are counted and reported as rejected. The loss is the token-mean negative
log-likelihood of the solution (and its end-of-turn token) given the chat-formatted prompt.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Callable

import torch

from rlvr.progress import format_seconds, step_eta
from rlvr.records import Task
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.train.policy import autocast


@dataclass(frozen=True)
class SFTReport:
    """What the cold start did: examples kept / rejected, steps, final loss, seconds."""

    kept: int
    rejected: int
    steps: int
    first_loss: float
    final_loss: float
    seconds: float


def verified_examples(tasks: list[Task], rewards: RewardPipeline) -> tuple[list[Task], int]:
    """Tasks whose ``solution`` verifies correct against their own reference, and the number
    rejected (no solution, or a solution that does not verify)."""
    with_solution = [t for t in tasks if t.solution]
    results = rewards.score_batch([ScoreRequest(t.solution, t.reference, t.task_type)
                                   for t in with_solution])
    kept = [t for t, r in zip(with_solution, results) if r.status.value == "correct"]
    return kept, len(tasks) - len(kept)


def _encode(tokenizer, prompt: list[int], solution: str, end_ids: list[int],
            max_length: int) -> tuple[list[int], list[int]]:
    answer = tokenizer(solution, add_special_tokens=False).input_ids + end_ids
    ids = (prompt + answer)[:max_length]
    labels = ([-100] * len(prompt) + answer)[:max_length]
    return ids, labels


def sft_steps(examples: int, config) -> int:
    """Optimizer steps of an SFT run on ``examples`` examples (``config``:
    :class:`rlvr.train.config.SFTConfig`)."""
    return math.ceil(examples / config.batch_size) * config.epochs


def run_sft(model, tokenizer, examples: list[Task], prompts: list[list[int]], config,
            seed: int, bf16: bool, rejected: int = 0, log=print,
            progress: Callable[[int], None] | None = None) -> SFTReport:
    """Fine-tune ``model`` in place on ``examples`` (with their chat ``prompts``).

    Args:
        config: :class:`rlvr.train.config.SFTConfig`.
        rejected: solutions rejected before SFT (reported).
        log: called with a progress string (loss, elapsed, ETA) every 10 steps.
        progress: called with the steps done after every step.
    """
    start = time.perf_counter()
    end_ids = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    data = [_encode(tokenizer, p, t.solution, end_ids, config.max_length)
            for t, p in zip(examples, prompts)]
    steps_per_epoch = math.ceil(len(data) / config.batch_size)
    total = sft_steps(len(data), config)
    trainable = [p for p in model.parameters() if p.requires_grad]  # LoRA: adapters only
    optimizer = torch.optim.AdamW(trainable, lr=config.learning_rate, weight_decay=0.0)
    warmup = max(1, total // 20)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(total - warmup, 1))))
    rng = random.Random(seed)
    losses: list[float] = []
    model.train()
    for epoch in range(config.epochs):
        order = list(range(len(data)))
        rng.shuffle(order)
        for b in range(steps_per_epoch):
            batch = [data[i] for i in order[b * config.batch_size:(b + 1) * config.batch_size]]
            loss = _step(model, batch, tokenizer.pad_token_id, bf16)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            if progress is not None:
                progress(len(losses))
            if len(losses) % 10 == 0 or len(losses) == total:
                elapsed = time.perf_counter() - start
                eta = step_eta(len(losses), total, elapsed)
                log(f"sft step {len(losses)}/{total} loss {losses[-1]:.4f}, "
                    f"{format_seconds(elapsed)} elapsed" + (f", {eta}" if eta else ""))
    return SFTReport(len(examples), rejected, len(losses), losses[0] if losses else float("nan"),
                     losses[-1] if losses else float("nan"), time.perf_counter() - start)


def _step(model, batch: list[tuple[list[int], list[int]]], pad_id: int, bf16: bool):
    # Left padding puts every row's answer at the end, so the LM head and the log-softmax run
    # on the answer positions only (``logits_to_keep``): the prompt positions, most of an RLVR
    # example, carry no loss (labels -100) and would cost a [rows, prompt, vocab] projection.
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (x, y) in enumerate(batch):
        ids[row, width - len(x):] = torch.tensor(x)
        labels[row, width - len(y):] = torch.tensor(y)
        attention[row, width - len(x):] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    labelled = labels != -100
    has_answer = labelled.any(-1)
    first = int(labelled.float().argmax(-1)[has_answer].min()) if has_answer.any() else width - 1
    keep = width - max(first - 1, 0)  # logits at position t predict token t + 1
    with autocast(bf16):
        logits = model(input_ids=ids, attention_mask=attention, position_ids=positions,
                       logits_to_keep=keep, use_cache=False).logits
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    target = labels[:, width - keep + 1:]
    mask = target != -100
    nll = -logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (nll * mask).sum() / mask.sum().clamp(min=1)
