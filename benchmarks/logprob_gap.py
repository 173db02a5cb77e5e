"""Sampler vs trainer: how far the rollout engine's per-token log-probs are from the trainer's on
the same sequences (the ``rollout_logprob_gap`` a synchronous run logs), in fp32 and in bf16.

Model: the default SmolLM2-135M-Instruct. The fp32 ``torch`` engine samples ``--prompts``
chat-formatted questions x ``--n`` completions of up to ``--new-tokens`` tokens (temperature
1.0, seed 0); on those sequences it compares, token by token:

- ``fp32 engine / fp32 trainer``: the engine's reported log-probs against
  :func:`rlvr.models.forward.completion_log_probs` in fp32 (the synchronous default: the two
  compute the same function);
- each against an fp64 forward of the same model (which side the rounding comes from);
- ``bf16 engine / fp32 trainer``: the ``torch`` engine in bf16, teacher-forced on the same
  sequences (each step's logits are replaced by a one-hot choice of the recorded token; the
  log-prob is of the engine's own bf16 logits), against the fp32 trainer;
- ``fp32 engine / bf16 trainer``: the fp32 engine against the trainer under bf16 autocast.

``--paths`` first runs the fp32 engine three ways on the same prompts and seed, each against
the trainer and fp64: its default (native decode-attention and elementwise kernels, oneDNN
prepacked matmuls), ``native_kernels=False`` (pure-torch cascade attention) and, in addition,
``prepack_fp32=False`` (transformers' own matmul kernel): where the gap comes from.

On a CPU without native bf16 (AVX2 only) torch emulates bf16 matmuls ~85x slower than fp32:
keep ``--bf16-rows`` small there (default 4 rows, ``--bf16-tokens`` 32 tokens each).

Usage: python benchmarks/logprob_gap.py [--prompts 3] [--n 4] [--new-tokens 96]
[--bf16-rows 4] [--bf16-tokens 32] [--paths] (``--bf16-rows 0``: fp32 only). Last line:
``logprob gap (max / mean nats/token): fp32 A / B over N tokens, bf16 engine C / D, bf16 trainer
E / F over M tokens``.
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch

QUESTIONS = ("What is 37 + 48? Think step by step.", "Why is the sky blue?",
             "Name a prime above 50 and explain why it is prime.", "What is 12 times 13?")


def _prompts(tokenizer, count: int) -> list[list[int]]:
    out = []
    for text in QUESTIONS[:count]:
        encoded = tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                add_generation_prompt=True, tokenize=True)
        out.append(list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded))
    return out


class ForcedTokens:
    """Decode hooks that make the engine emit recorded tokens (teacher forcing) and keep the
    log-prob of each under the engine's own logits (fp32 ``log_softmax`` of them)."""

    def __init__(self, tokens: torch.Tensor):
        self.tokens = tokens  # LongTensor[R, T]
        self.logprobs = torch.zeros(tokens.shape, dtype=torch.float64)

    def process_logits(self, rows, step, logits):
        forced = torch.full_like(logits, float("-inf"))
        forced[torch.arange(len(rows)), self.tokens[rows, step]] = 0
        return forced

    def on_step(self, rows, step, tokens, logprobs, logits):
        own = torch.log_softmax(logits.double(), -1).gather(1, tokens[:, None])[:, 0]
        self.logprobs[rows, step] = own  # no row is finished early (None: keep decoding)


def _stats(gap: torch.Tensor) -> tuple[float, float]:
    return float(gap.max()), float(gap.mean())


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _machine import machine_line

    from rlvr.models import load_model_and_tokenizer
    from rlvr.models.forward import build_sequences, completion_log_probs
    from rlvr.rollout import SamplingParams, TorchEngine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=3, choices=range(1, len(QUESTIONS) + 1))
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--bf16-rows", type=int, default=4)
    parser.add_argument("--bf16-tokens", type=int, default=32)
    parser.add_argument("--paths", action="store_true")
    args = parser.parse_args(argv)

    print(machine_line("fp32"), flush=True)
    model, tokenizer = load_model_and_tokenizer("smollm2-135m-instruct")
    model.eval()
    prompts = _prompts(tokenizer, args.prompts)
    params = SamplingParams(temperature=1.0, max_new_tokens=args.new_tokens, n=args.n, seed=0,
                            stop_token_ids=(tokenizer.eos_token_id,))
    double = copy.deepcopy(model).double()
    if args.paths:
        for label, options in (("default", {}), ("native_kernels=False",
                                                 {"native_kernels": False}),
                               ("native_kernels=False, prepack_fp32=False",
                                {"native_kernels": False, "prepack_fp32": False})):
            run = TorchEngine(model, dtype=torch.float32, **options).generate(prompts, params)
            seqs = build_sequences([prompts[int(i)] for i in run.prompt_index],
                                   run.completion_ids, run.completion_mask,
                                   tokenizer.pad_token_id)
            with torch.no_grad():
                trainer = completion_log_probs(model, seqs, bf16=False).double()
                exact = completion_log_probs(double, seqs, bf16=False)
            engine, mask = run.logprobs[:, :trainer.shape[1]].double(), seqs.completion_mask
            gap = _stats((engine - trainer).abs()[mask])
            print(f"path {label}: engine / trainer max {gap[0]:.2e}, mean {gap[1]:.2e} over "
                  f"{int(mask.sum())} tokens; engine / fp64 mean "
                  f"{(engine - exact).abs()[mask].mean():.2e}, trainer / fp64 mean "
                  f"{(trainer - exact).abs()[mask].mean():.2e}", flush=True)
    out = TorchEngine(model, dtype=torch.float32).generate(prompts, params)
    rows = [prompts[int(i)] for i in out.prompt_index]
    seqs = build_sequences(rows, out.completion_ids, out.completion_mask,
                           tokenizer.pad_token_id)
    mask, width = seqs.completion_mask, seqs.completion_mask.shape[1]
    engine = out.logprobs[:, :width].double()
    with torch.no_grad():
        trainer = completion_log_probs(model, seqs, bf16=False).double()
        exact = completion_log_probs(double, seqs, bf16=False)
    fp32 = _stats((engine - trainer).abs()[mask])
    print(f"fp32 engine / fp32 trainer: max {fp32[0]:.2e}, mean {fp32[1]:.2e} nats/token over "
          f"{int(mask.sum())} tokens; engine / fp64 mean "
          f"{(engine - exact).abs()[mask].mean():.2e}, trainer / fp64 mean "
          f"{(trainer - exact).abs()[mask].mean():.2e}", flush=True)

    if args.bf16_rows <= 0:
        print(f"logprob gap (max / mean nats/token): fp32 {fp32[0]:.2e} / {fp32[1]:.2e} over "
              f"{int(mask.sum())} tokens")
        return 0
    # bf16 on a handful of rows, teacher-forced on the fp32 engine's tokens
    picked = torch.arange(min(args.bf16_rows, out.num_rows)) * max(
        1, out.num_rows // max(1, args.bf16_rows))
    picked = picked[picked < out.num_rows]
    cut = min(args.bf16_tokens, width)
    tokens = out.completion_ids[picked, :cut]
    sub_mask = mask[picked, :cut]
    sub_prompts = [rows[int(i)] for i in picked]
    hooks = ForcedTokens(tokens)
    forced = SamplingParams(temperature=1.0, max_new_tokens=cut, n=1, seed=0)
    TorchEngine(model, dtype=torch.bfloat16).generate(sub_prompts, forced, hooks=hooks)
    sub = build_sequences(sub_prompts, tokens, sub_mask, tokenizer.pad_token_id)
    with torch.no_grad():
        bf16_trainer = completion_log_probs(model, sub, bf16=True).double()
    bf16_engine = _stats((hooks.logprobs - trainer[picked, :cut]).abs()[sub_mask])
    bf16_train = _stats((engine[picked, :cut] - bf16_trainer).abs()[sub_mask])
    count = int(sub_mask.sum())
    print(f"bf16 engine / fp32 trainer: max {bf16_engine[0]:.2e}, mean {bf16_engine[1]:.2e}; "
          f"fp32 engine / bf16 trainer: max {bf16_train[0]:.2e}, mean {bf16_train[1]:.2e} "
          f"over {count} tokens", flush=True)
    print(f"logprob gap (max / mean nats/token): fp32 {fp32[0]:.2e} / {fp32[1]:.2e} over "
          f"{int(mask.sum())} tokens, bf16 engine {bf16_engine[0]:.2e} / {bf16_engine[1]:.2e}, "
          f"bf16 trainer {bf16_train[0]:.2e} / {bf16_train[1]:.2e} over {count} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
