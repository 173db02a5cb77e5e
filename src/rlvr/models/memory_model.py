"""Peak memory of a GRPO step, predicted from the model's shape and the step's workload.

What a step holds, in bytes (``b`` bytes per value of the compute dtype, 4 for fp32; N the
parameters, N_t those trained; L layers, H hidden size, I MLP width, V vocabulary, K the
key/value width ``kv_heads x head_dim``; U prompts of P tokens, R = U x G rows of T completion
tokens; m rows per update micro-batch):

- a fixed workspace (:data:`WORKSPACE`); the policy, ``N b``; AdamW's two moments and the
  gradient of the trained weights,
  ``3 x 4 N_t`` (the moments exist from the first optimizer step on);
- with LoRA and ``engine_copy``, a plain merged copy of the policy for the rollout engine
  (``N b``, what :func:`rlvr.train.setup.make_engine` builds for an engine that runs a plain
  module: ``hf``, ``vllm``, Ray's actors); the ``torch`` engine snapshots the LoRA policy
  itself, merging each layer on the fly (no copy; a run's default);
- the ``torch`` engine's weight snapshot: every decoder matmul weight and the LM head,
  prepacked (``(N_layers + V H) b``; the embedding and norms are shared, not copied);
- rollout: the KV cache, one copy per prompt plus one per row of its completion
  (``2 L K b (U P + R T)``), and per decode step the ``R x V`` fp32 logits (x3: logits,
  probabilities, sampling buffers);
- update, per micro-batch of m rows (``shared_prefix: step``: the step's U prompts once, their
  activations held for the whole step): activations per token and layer of
  ``A = (c_h H + c_k K + c_i I) x 4`` bytes (the tensors a Llama-style layer saves for its
  backward: c_h = 11, c_k = 4, c_i = 4, counted from transformers' Llama layer: norms' inputs
  and outputs, q / k / v and their rotary outputs, attention output, o / gate / up / down
  inputs, the SiLU product's operands); with activation checkpointing only each layer's
  input (``H x 4``) plus one layer's full activations for the replay;
- the log-probs: the logits, their log-softmax and the gradient of the logits,
  ``3 x m T V x 4`` bytes; with ``logprob_chunk_tokens = c``, ``6 x c V x 4`` (a chunk's
  recompute and backward).

The constants were counted, then checked against peak resident memory measured in a fresh
process (benchmarks/scaling.py; tests/update/test_memory_model.py checks a reduced size
within the tolerance it states). Bytes above the process's own baseline (interpreter, torch
and transformers, ~0.5 GB) are what is predicted; ``baseline_bytes`` adds it.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Activation tensors saved per token and decoder layer (module doc): hidden-sized, key/value-
#: sized and MLP-sized.
SAVED_HIDDEN, SAVED_KV, SAVED_MLP = 11, 4, 4
#: fp32 ``positions x vocabulary`` blocks alive at the update's peak: the logits, their
#: log-softmax and the logits' gradient; a chunk's backward (recomputed logits, log-softmax,
#: the entropy's softmax and product, two gradients) holds about twice as many.
LOGITS_COPIES, CHUNK_COPIES = 3, 6
#: Bytes a step holds whatever its size: the allocator's arenas, oneDNN's scratch and packed
#: kernels, the engine's compiled kernels (measured above the baseline at a reduced size).
WORKSPACE = 96 * 2**20


@dataclass(frozen=True)
class Shape:
    """A Llama / Qwen2-style decoder's shape (the fields of its ``config.json``).

    Attributes:
        hidden, intermediate, layers, heads, kv_heads, vocab: as ``hidden_size``,
            ``intermediate_size``, ``num_hidden_layers``, ``num_attention_heads``,
            ``num_key_value_heads``, ``vocab_size``.
        tied: ``tie_word_embeddings`` (one V x H matrix for the embedding and the head).
        qkv_bias: biases on q / k / v (Qwen2).
    """

    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool = True
    qkv_bias: bool = False

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_width(self) -> int:
        """K = kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def layer_params(self) -> int:
        """Parameters of one decoder layer: q, o (H x H), k, v (H x K), gate, up, down
        (H x I each), two norms, q / k / v biases."""
        h, k = self.hidden, self.kv_width
        bias = (h + 2 * k) if self.qkv_bias else 0
        return 2 * h * h + 2 * h * k + 3 * h * self.intermediate + 2 * h + bias

    @property
    def body_params(self) -> int:
        """The decoder layers' parameters (the matmuls a token runs through, LM head aside)."""
        return self.layers * self.layer_params

    @property
    def params(self) -> int:
        """All parameters: layers, final norm, embedding (and an untied head)."""
        embed = self.vocab * self.hidden * (1 if self.tied else 2)
        return self.body_params + self.hidden + embed

    def lora_params(self, rank: int) -> int:
        """LoRA adapter parameters of rank ``rank`` on every decoder linear layer
        (A: r x in, B: out x r; ``target_modules="all-linear"``, the head excluded)."""
        h, k, i = self.hidden, self.kv_width, self.intermediate
        per_layer = sum(rank * (a + b) for a, b in
                        ((h, h), (h, k), (h, k), (h, h), (h, i), (h, i), (i, h)))
        return self.layers * per_layer


@dataclass(frozen=True)
class StepMemory:
    """Predicted bytes above the process baseline: ``resident`` (held across the step),
    ``rollout`` and ``update`` (the peaks of the two phases, resident included)."""

    resident: int
    rollout: int
    update: int

    @property
    def peak(self) -> int:
        return max(self.rollout, self.update)


def predict_step_memory(shape: Shape, *, prompts: int, group: int, prompt_tokens: int,
                        completion_tokens: int, micro_batch: int, lora_rank: int = 0,
                        activation_checkpointing: bool = False,
                        logprob_chunk_tokens: int | None = None, engine_copy: bool = False,
                        engine: bool = True, value_bytes: int = 4,
                        baseline_bytes: int = 0) -> StepMemory:
    """Peak memory of one GRPO step (module doc for every term).

    Args:
        shape: the model.
        prompts: U distinct prompts; group: G rows each (R = U x G).
        prompt_tokens: P; completion_tokens: T (every row at the cap: the worst case).
        micro_batch: m, rows per update micro-batch (``grpo.micro_batch_size``).
        lora_rank: 0 for full fine-tuning, else LoRA's rank (frozen base weights).
        activation_checkpointing, logprob_chunk_tokens: the update's memory settings.
        engine_copy: with LoRA, the engine samples from a plain merged copy of the policy
            (an engine other than ``torch``).
        engine: the rollout engine's snapshot is resident (False: an update alone, as a
            process that only trains holds it).
        value_bytes: bytes per value of the compute dtype (4: fp32, 2: bf16).
        baseline_bytes: added to every figure (the process before the model exists).

    Returns:
        :class:`StepMemory` in bytes.

    Raises:
        ValueError: a count below 1.
    """
    counts = dict(prompts=prompts, group=group, prompt_tokens=prompt_tokens,
                  completion_tokens=completion_tokens, micro_batch=micro_batch)
    for name, value in counts.items():
        if value < 1:
            raise ValueError(f"predict_step_memory: {name} must be >= 1, got {value}")
    b, f32 = value_bytes, 4
    h, k, i, v, layers = shape.hidden, shape.kv_width, shape.intermediate, shape.vocab, shape.layers
    rows = prompts * group
    trained = shape.lora_params(lora_rank) if lora_rank else shape.params
    policy = shape.params * b
    if lora_rank:
        policy += shape.lora_params(lora_rank) * f32
    engine_copy = shape.params * b if lora_rank and engine_copy else 0
    snapshot = (shape.body_params + v * h) * b if engine else 0
    optimizer = 2 * trained * f32
    resident = policy + engine_copy + snapshot + optimizer + WORKSPACE + baseline_bytes

    kv = 2 * layers * k * b * (prompts * prompt_tokens + rows * completion_tokens)
    decode = 3 * rows * v * f32 + rows * (4 * h + 2 * i) * b
    rollout = resident + kv + decode

    per_token_layer = (SAVED_HIDDEN * h + SAVED_KV * k + SAVED_MLP * i) * f32
    m = min(micro_batch, rows)
    prompt_tokens_step = prompts * prompt_tokens  # shared_prefix: step, held for the step
    micro_tokens = m * completion_tokens
    if activation_checkpointing:
        held = (prompt_tokens_step + micro_tokens) * layers * h * f32
        replay = max(prompt_tokens_step, micro_tokens) * per_token_layer
        activations = held + replay
    else:
        activations = (prompt_tokens_step + micro_tokens) * layers * per_token_layer
    if logprob_chunk_tokens is None:
        logits = LOGITS_COPIES * micro_tokens * v * f32
    else:
        logits = CHUNK_COPIES * min(logprob_chunk_tokens, micro_tokens) * v * f32
    gradients = trained * f32
    update = resident + activations + logits + gradients
    return StepMemory(resident=int(resident), rollout=int(rollout), update=int(update))
