"""SFT cold start (R17): supervised fine-tuning on verified worked solutions.

Only solutions whose final answer the reward pipeline verifies as correct are used; the
others are counted and reported as rejected. The loss is the token-mean negative
log-likelihood of the solution (and its end-of-turn token) given the chat-formatted prompt.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from rlvr.io import atomic_write
from rlvr.models.common_prefix import MIN_SHARED_PREFILL, common_prefix_length, split_prefix
from rlvr.models.forward import autocast, cache_argument
from rlvr.models.step_prefix import expand_prefix, prefix_cache
from rlvr.progress import format_seconds, step_eta
from rlvr.records import Task
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest


class SFTInputError(ValueError):
    """SFT cannot train: no example keeps an answer token within ``sft.max_length``."""


@dataclass(frozen=True)
class SFTReport:
    """What the cold start did.

    Attributes:
        kept: verified examples trained on (``no_answer`` ones excluded).
        rejected: solutions rejected before SFT (no solution, or one that does not verify).
        steps: optimizer steps.
        first_loss, final_loss: token-mean answer NLL (nats/token) of the first / last step.
        seconds: wall time.
        truncated: examples cut at ``sft.max_length`` (prompt + answer + end token longer),
            those left without any answer token included.
        no_answer: examples whose prompt alone fills ``sft.max_length``: no answer token
            left, nothing to learn; dropped before training.
        max_length: ``sft.max_length`` (tokens).
        longest: the longest example, prompt + answer + end token, in tokens.
    """

    kept: int
    rejected: int
    steps: int
    first_loss: float
    final_loss: float
    seconds: float
    truncated: int = 0
    no_answer: int = 0
    max_length: int = 0
    longest: int = 0


def no_examples_error(tasks: int, without_solution: int, what: str = "solutions"
                      ) -> SFTInputError:
    """The error of an SFT that has nothing to train on: ``tasks`` SFT tasks, of which
    ``without_solution`` carry no worked solution and the rest have one that does not verify
    correct (``what`` names the examples, e.g. ``"tool-use demonstrations"``). It names the
    reason and the two fixes: ``solution`` fields that verify, or ``sft.enabled: false``."""
    failed = tasks - without_solution
    return SFTInputError(
        f"sft: 0 verified {what} among the {tasks} SFT tasks ({without_solution} have no "
        f"`solution` field, {failed} have one that does not verify as correct against the "
        f"task's reference): the cold start would train on nothing; give the tasks `solution` "
        f"fields whose final answers verify (check them with `rlvr verify`), or set "
        f"sft.enabled: false")


def verified_examples(tasks: list[Task], rewards: RewardPipeline) -> tuple[list[Task], int]:
    """Tasks whose ``solution`` verifies correct against their own reference, and the number
    rejected (no solution, or a solution that does not verify)."""
    with_solution = [t for t in tasks if t.solution]
    results = rewards.score_batch([ScoreRequest(t.solution, t.reference, t.task_type)
                                   for t in with_solution])
    kept = [t for t, r in zip(with_solution, results) if r.status.value == "correct"]
    return kept, len(tasks) - len(kept)


def _encode(tokenizer, prompt: list[int], solution: str, end_ids: list[int],
            max_length: int) -> tuple[list[int], list[int], int]:
    """``(ids, labels, full length)``: prompt + answer + end ids cut to ``max_length``
    tokens, labels -100 on the prompt; the length before the cut."""
    answer = tokenizer(solution, add_special_tokens=False).input_ids + end_ids
    ids = (prompt + answer)[:max_length]
    labels = ([-100] * len(prompt) + answer)[:max_length]
    return ids, labels, len(prompt) + len(answer)


def encode_examples(tokenizer, examples: list[Task], prompts: list[list[int]], max_length: int,
                    log=print) -> tuple[list[tuple[list[int], list[int]]], dict[str, int]]:
    """Tokenise the SFT examples and account for ``sft.max_length``.

    Returns ``(data, counts)``: ``data`` the ``(ids, labels)`` pairs that keep at least one
    answer token; ``counts`` ``{"truncated", "no_answer", "max_length", "longest"}`` (see
    :class:`SFTReport`). Any cut is logged, naming ``sft.max_length`` and the longest example.

    Raises:
        SFTInputError: no example keeps an answer token (every prompt fills ``max_length``),
            naming ``sft.max_length`` and the length needed.
    """
    end_ids = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    encoded = [_encode(tokenizer, p, t.solution, end_ids, max_length)
               for t, p in zip(examples, prompts)]
    return fit_examples(encoded, [len(p) for p in prompts], max_length, log)


def fit_examples(encoded: list[tuple[list[int], list[int], int]], prompt_lengths: list[int],
                 max_length: int, log=print
                 ) -> tuple[list[tuple[list[int], list[int]]], dict[str, int]]:
    """Account for ``sft.max_length`` over examples already cut to it (single-turn solutions
    or multi-turn demonstrations, :mod:`rlvr.train.demonstrations`).

    Args:
        encoded: per example ``(ids, labels, full length)``: ids and labels (-100: no loss)
            cut to ``max_length``, and the length before the cut.
        prompt_lengths: per example, the tokens before its first labelled one (for the
            error message).

    Returns and raises as :func:`encode_examples`.
    """
    data = [(ids, labels) for ids, labels, _ in encoded if any(x != -100 for x in labels)]
    longest = max((n for _, _, n in encoded), default=0)
    counts = {"truncated": sum(n > max_length for _, _, n in encoded),
              "no_answer": len(encoded) - len(data), "max_length": max_length,
              "longest": longest}
    if encoded and not data:
        raise SFTInputError(
            f"sft.max_length={max_length}: every one of the {len(encoded)} SFT examples is cut "
            f"before its answer (prompts are {min(prompt_lengths)}-{max(prompt_lengths)} "
            f"tokens): nothing would train; set sft.max_length to at least {longest} (the "
            f"longest prompt + answer), or sft.enabled=false")
    if counts["truncated"]:
        log(f"[yellow]sft.max_length={max_length}[/]: {counts['truncated']} of {len(encoded)} "
            f"examples cut (longest prompt + answer {longest} tokens); {counts['no_answer']} "
            f"keep no answer token and are dropped, {counts['truncated'] - counts['no_answer']} "
            f"train on part of their answer")
    return data, counts


def sft_steps(examples: int, config) -> int:
    """Optimizer steps of an SFT run on ``examples`` examples (``config``:
    :class:`rlvr.train.sections.SFTConfig`)."""
    return math.ceil(examples / config.batch_size) * config.epochs


def run_sft(model, tokenizer, examples: list[Task], prompts: list[list[int]], config,
            seed: int, bf16: bool, rejected: int = 0, log=print,
            progress: Callable[[int], None] | None = None,
            state_path: Path | None = None, resume: bool = False,
            encoded: tuple[list[tuple[list[int], list[int]]], dict[str, int]] | None = None
            ) -> SFTReport:
    """Fine-tune ``model`` in place on ``examples`` (with their chat ``prompts``), or on
    ``encoded`` examples.

    Args:
        config: :class:`rlvr.train.sections.SFTConfig`.
        rejected: solutions rejected before SFT (reported).
        log: called with a progress string (loss, elapsed, ETA) every 10 steps.
        progress: called with the steps done after every step.
            It also gets the truncation line.
        state_path: the SFT checkpoint file: every ``config.checkpoint_every`` optimizer
            steps the model's state dict, the optimizer, the scheduler, the data order and
            position, the losses so far and the RNG states are written there atomically.
            ``None``: no SFT checkpoints.
        resume: continue from ``state_path`` when it exists (``model`` must be built as for
            the interrupted SFT: same model, same wrapping); the result equals an
            uninterrupted SFT (same seed, same machine).
        encoded: ``(data, counts)`` of examples encoded elsewhere (multi-turn
            demonstrations: :func:`rlvr.train.demonstrations.encode_demonstrations`), as
            :func:`encode_examples` returns them; ``examples`` and ``prompts`` are then
            unused.

    Raises:
        SFTInputError: no example at all (:func:`no_examples_error`), none keeps an answer
            token within ``config.max_length`` (before any training), or the SFT checkpoint
            belongs to different data.
    """
    start = time.perf_counter()
    data, counts = (encoded if encoded is not None else
                    encode_examples(tokenizer, examples, prompts, config.max_length, log))
    if not data:
        raise no_examples_error(rejected, rejected)
    steps_per_epoch = math.ceil(len(data) / config.batch_size)
    total = sft_steps(len(data), config)
    trainable = [p for p in model.parameters() if p.requires_grad]  # LoRA: adapters only
    optimizer = torch.optim.AdamW(trainable, lr=config.learning_rate, weight_decay=0.0)
    warmup = max(1, total // 20)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(total - warmup, 1))))
    rng = random.Random(seed)
    losses: list[float] = []
    first_epoch, first_batch, order, seconds_before = 0, 0, None, 0.0
    if resume and state_path is not None and state_path.is_file():
        state = torch.load(state_path, weights_only=False)
        if (state["examples"], state["total"]) != (len(data), total):
            raise SFTInputError(f"{state_path}: an SFT checkpoint of {state['examples']} "
                                f"examples / {state['total']} steps, this SFT has {len(data)} / "
                                f"{total}: not the same SFT (remove the file to start SFT "
                                f"afresh)")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        rng.setstate(state["order_rng"])
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        first_epoch, first_batch, order = state["epoch"], state["batch"], state["order"]
        losses, seconds_before = state["losses"], state["seconds"]
        log(f"sft: resumed from {state_path.name} at step {len(losses)}/{total}")
    resumed_at = len(losses)
    model.train()
    for epoch in range(first_epoch, config.epochs):
        if order is None:
            order = list(range(len(data)))
            rng.shuffle(order)
        for b in range(first_batch if epoch == first_epoch else 0, steps_per_epoch):
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
                eta = step_eta(len(losses) - resumed_at, total - resumed_at, elapsed)
                log(f"sft step {len(losses)}/{total} loss {losses[-1]:.4f}, "
                    f"{format_seconds(elapsed)} elapsed" + (f", {eta}" if eta else ""))
            if (state_path is not None and config.checkpoint_every
                    and len(losses) % config.checkpoint_every == 0 and len(losses) < total):
                nxt = (epoch, b + 1) if b + 1 < steps_per_epoch else (epoch + 1, 0)
                _save_state(state_path, {
                    "examples": len(data), "total": total, "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                    "order_rng": rng.getstate(), "torch_rng": torch.get_rng_state(),
                    "python_rng": random.getstate(), "epoch": nxt[0], "batch": nxt[1],
                    "order": order if nxt[0] == epoch else None, "losses": losses,
                    "seconds": seconds_before + time.perf_counter() - start})
        order = None
    return SFTReport(len(data), rejected, len(losses), losses[0] if losses else float("nan"),
                     losses[-1] if losses else float("nan"),
                     seconds_before + time.perf_counter() - start, **counts)


def _save_state(path: Path, state: dict) -> None:
    """``torch.save`` to a temp file beside ``path``, renamed over it when complete."""
    with atomic_write(path, "wb") as f:
        torch.save(state, f)


def _step(model, batch: list[tuple[list[int], list[int]]], pad_id: int, bf16: bool,
          shared_prefix: bool = True):
    """Token-mean NLL (a 0-dim tensor with its graph) of the labelled tokens of ``batch``
    (``(ids, labels)`` pairs, labels -100 where no loss).

    Left padding puts every row's answer at the end, so the LM head and the log-softmax run on
    the answer positions only (``logits_to_keep``): the prompt positions, most of an RLVR
    example, carry no loss and would cost a [rows, prompt, vocab] projection. A prefix that
    every prompt starts with (a chat template's system message and user header, at least
    :data:`rlvr.models.common_prefix.MIN_SHARED_PREFILL` tokens) runs once for the batch and
    the rows run on top of its cache: the same loss up to float summation order (on the
    default preset's ~66-token rows, 27 shared, ~1.4x less compute); ``shared_prefix=False``
    runs every row whole (the benchmark's baseline).
    """
    ids, labels, attention = _pad(batch, pad_id)
    width = ids.shape[1]
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    labelled = labels != -100
    has_answer = labelled.any(-1)
    first = int(labelled.float().argmax(-1)[has_answer].min()) if has_answer.any() else width - 1
    keep = width - max(first - 1, 0)  # logits at position t predict token t + 1
    shared = _shared_prompt_length(ids, attention, labelled) if shared_prefix else 0
    extra = {}
    if shared >= MIN_SHARED_PREFILL:
        split = split_prefix(ids, attention, shared)
        extra[cache_argument(model)] = expand_prefix(
            prefix_cache(model, split.prefix_ids, bf16=bf16), len(batch))
        ids, positions = split.rest_ids, split.rest_positions
        attention = torch.cat([attention.new_ones(len(batch), shared), split.rest_mask], dim=1)
    with autocast(bf16):
        logits = model(input_ids=ids, attention_mask=attention, position_ids=positions,
                       logits_to_keep=keep, use_cache=bool(extra), **extra).logits
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    target = labels[:, width - keep + 1:]
    mask = target != -100
    nll = -logp.gather(-1, target.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return (nll * mask).sum() / mask.sum().clamp(min=1)


def _pad(batch: list[tuple[list[int], list[int]]], pad_id: int):
    """``(ids, labels, attention)`` [B, W]: the rows left-padded to the longest (labels -100,
    attention 0 on padding)."""
    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), -100, dtype=torch.long)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (x, y) in enumerate(batch):
        ids[row, width - len(x):] = torch.tensor(x)
        labels[row, width - len(y):] = torch.tensor(y)
        attention[row, width - len(x):] = 1
    return ids, labels, attention


def _shared_prompt_length(ids, attention, labelled) -> int:
    """Tokens every left-padded row of ``ids`` [B, W] starts with
    (:func:`rlvr.models.common_prefix.common_prefix_length`), short of each row's first
    labelled token and of the unlabelled one before it, whose logits predict it."""
    lengths = attention.sum(-1)
    first_label = torch.where(labelled.any(-1),
                              labelled.float().argmax(-1) - (ids.shape[1] - lengths), lengths)
    return max(0, min(common_prefix_length(ids, attention.bool()), int(first_label.min()) - 1))
