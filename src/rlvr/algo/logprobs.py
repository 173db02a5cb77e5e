"""Per-token log-probabilities of given tokens, and completion masks.

Layout conventions: a model's ``logits: FloatTensor[N, L, V]`` over ``input_ids: LongTensor[N, L]``
(prompt + completion) predict the *next* token, so the log-prob of token ``input_ids[:, t+1]``
sits at ``logits[:, t]``. :func:`token_log_probs` takes already aligned pairs;
:func:`next_token_log_probs` does the one-position shift. Everything is fp32
(``log_softmax`` in bf16 loses ~3 significant digits, enough to bias ratios and KL, R13).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor

from rlvr import kernels
from rlvr.algo.entropy import DEFAULT_CHUNK_BYTES, rows_per_chunk
from rlvr.algo.utils import as_bool_mask, check_ndim


def token_log_probs(
    logits: Tensor,
    token_ids: Tensor,
    *,
    temperature: float = 1.0,
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> Tensor:
    """``log softmax(logits / temperature)[token_ids]`` per position, in fp32.

    Formula: ``log p(y_t) = z_{t, y_t} / tau - logsumexp(z_t / tau)``, computed as fp32
    ``log_softmax`` + ``gather`` over chunks of positions, so the fp32 ``[N, T, V]`` block is
    never materialised whole. ``temperature`` must be the sampling temperature when the result
    is compared with the sampler's log-probs (the ratio pi_theta / pi_old of the loss).

    Args:
        logits: FloatTensor[N, T, V] (any float dtype), aligned with ``token_ids``.
        token_ids: LongTensor[N, T], values in [0, V).
        temperature: > 0.
        chunk_bytes: memory budget of one fp32 chunk of logits.

    Returns:
        FloatTensor[N, T] (fp32), values <= 0; gradients flow to ``logits``.

    Raises:
        ValueError: on shape mismatch or ``temperature <= 0``.
    """
    return _chunked(logits, token_ids, temperature, chunk_bytes, entropy=None)[0]


def _chunked(logits: Tensor, token_ids: Tensor, temperature: float, chunk_bytes: int,
             entropy: str | None) -> tuple[Tensor, Tensor | None]:
    """The log-probs (and, with ``entropy``, the entropies) of :func:`token_log_probs` and
    :func:`token_log_probs_and_entropy`: the native kernels' :class:`LogSoftmaxGather` over
    fp32 CPU logits where they are available, else one fp32 log-softmax per chunk of
    positions."""
    check_ndim("logits", logits, 3)
    check_ndim("token_ids", token_ids, 2)
    if tuple(logits.shape[:2]) != tuple(token_ids.shape):
        raise ValueError(
            f"logits {list(logits.shape)} do not align with token_ids {list(token_ids.shape)}"
        )
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    n, t, v = logits.shape
    flat_logits = logits.reshape(n * t, v)
    flat_ids = token_ids.reshape(n * t).long()
    lib = _native_for(flat_logits, flat_ids)
    if lib is not None:
        # the native kernel keeps no [N T, V] block: the logits in one piece (their gradient,
        # the one block it writes, is needed whole by the head's backward anyway)
        out = LogSoftmaxGather.apply(flat_logits, flat_ids, 1.0 / temperature, entropy, lib)
        if entropy is None:
            return out.reshape(n, t), None
        return out[0].reshape(n, t), out[1].reshape(n, t)
    step = rows_per_chunk(v, chunk_bytes)
    logps, entropies = [], []
    # split, not slicing: the chunks' gradients are joined by one concatenation, where each
    # slice's backward would zero-fill a whole [N T, V] gradient and add it up
    for z, ids in zip(flat_logits.split(step), flat_ids.split(step), strict=True):
        z = z.float()
        # at temperature 1 the division is skipped: one pass over a vocabulary-wide block
        # (and its backward) fewer, bit for bit the same values
        full = torch.log_softmax(z if temperature == 1.0 else z / temperature, dim=-1)
        logps.append(full.gather(-1, ids.unsqueeze(-1)).squeeze(-1))
        if entropy is not None:
            source = full if entropy == "grad" else full.detach()
            entropies.append(-(source.exp() * source).sum(-1))
    empty = flat_logits.new_zeros(0, dtype=torch.float32)
    logp = (torch.cat(logps) if logps else empty).reshape(n, t)
    if entropy is None:
        return logp, None
    return logp, (torch.cat(entropies) if entropies else empty.clone()).reshape(n, t)


def _native_for(logits: Tensor, ids: Tensor):
    """The native kernel library when it computes these fp32 CPU logits, else None.

    Raises:
        ValueError: a token id outside [0, V) (the kernel indexes rows with them unchecked).
    """
    if logits.device.type != "cpu" or logits.dtype != torch.float32 or not ids.numel():
        return None
    lib = kernels.native()
    if lib is not None and (int(ids.min()) < 0 or int(ids.max()) >= logits.shape[-1]):
        raise ValueError(f"token ids must lie in [0, {logits.shape[-1]}), got "
                         f"[{int(ids.min())}, {int(ids.max())}]")
    return lib


class LogSoftmaxGather(torch.autograd.Function):
    """``log_softmax(z / tau)[ids]`` (and the entropy) of fp32 rows in two native passes,
    and a backward that writes the logits' gradient in one (no ``[N, V]`` log-softmax kept,
    no zero-filled gradient to scatter into).

    ``apply(z, ids, inv_t, entropy, lib)``: z FloatTensor[N, V] (CPU), ids LongTensor[N],
    ``inv_t = 1 / tau``, entropy ``None`` / ``"detached"`` / ``"grad"``. Returns log-probs
    FloatTensor[N], or ``(log_probs, entropy)`` with entropy FloatTensor[N] (nats).

    Gradient (x = z / tau, p = softmax(x), H the entropy): ``d logp / d x_j = 1[j = id] -
    p_j`` and ``d H / d x_j = -p_j (log p_j + H)``; both times 1 / tau for z.
    """

    @staticmethod
    def forward(ctx, z: Tensor, ids: Tensor, inv_t: float, entropy: str | None, lib):
        z, ids = z.detach().contiguous(), ids.contiguous()
        rows, vocab = z.shape
        logp, lse = torch.empty(rows), torch.empty(rows)
        ent = torch.empty(rows) if entropy is not None else None
        lib.log_softmax_gather_f32(z.data_ptr(), ids.data_ptr(), inv_t, logp.data_ptr(),
                                   lse.data_ptr(), None if ent is None else ent.data_ptr(),
                                   rows, vocab, torch.get_num_threads())
        ctx.save_for_backward(z, ids, lse, lse if ent is None else ent)
        ctx.inv_t, ctx.lib, ctx.entropy_grad = inv_t, lib, entropy == "grad"
        if ent is None:
            return logp
        if entropy != "grad":
            ctx.mark_non_differentiable(ent)
        return logp, ent

    @staticmethod
    def backward(ctx, grad_logp: Tensor, grad_ent: Tensor | None = None):
        z, ids, lse, ent = ctx.saved_tensors
        # autograd passes zeros for an unused output (materialized grads): never None here
        grad_ent = grad_ent.contiguous() if ctx.entropy_grad else None
        grad_logp = grad_logp.contiguous()
        dz = torch.empty_like(z)
        ctx.lib.log_softmax_gather_backward_f32(
            z.data_ptr(), ids.data_ptr(), ctx.inv_t, lse.data_ptr(), ent.data_ptr(),
            grad_logp.data_ptr(), None if grad_ent is None else grad_ent.data_ptr(),
            dz.data_ptr(), z.shape[0], z.shape[1], torch.get_num_threads())
        return dz, None, None, None, None


def token_log_probs_and_entropy(
    logits: Tensor,
    token_ids: Tensor,
    *,
    temperature: float = 1.0,
    entropy: str = "detached",
    chunk_bytes: int = DEFAULT_CHUNK_BYTES,
) -> tuple[Tensor, Tensor]:
    """:func:`token_log_probs` and each position's entropy (nats) from the same log-softmax.

    Formula: ``log p = log_softmax(z / tau)``; ``H = -sum_v p_v log p_v`` (Shannon entropy of
    the tempered distribution, the same value as :func:`rlvr.algo.entropy.token_entropy` up to
    fp32 rounding). One log-softmax per chunk serves both, instead of a second pass of
    logsumexp and softmax over the ``[N, T, V]`` block for the entropy.

    Args:
        logits: FloatTensor[N, T, V] (any float dtype; fp32 inside), aligned with ``token_ids``.
        token_ids: LongTensor[N, T], values in [0, V).
        temperature: > 0.
        entropy: ``"detached"`` (no gradient through the entropy: for logging) or ``"grad"``
            (differentiable: an entropy bonus).
        chunk_bytes: memory budget of one fp32 chunk of logits.

    Returns:
        ``(log_probs, entropy)``, both FloatTensor[N, T] (fp32).

    Raises:
        ValueError: on shape mismatch, ``temperature <= 0`` or an unknown ``entropy``.
    """
    if entropy not in ("detached", "grad"):
        raise ValueError(f"entropy must be 'detached' or 'grad', got {entropy!r}")
    return _chunked(logits, token_ids, temperature, chunk_bytes, entropy)


def next_token_log_probs(logits: Tensor, input_ids: Tensor, **options) -> Tensor:
    """Log-probs of ``input_ids[:, 1:]`` under ``logits[:, :-1]`` (the causal-LM shift).

    Args:
        logits: FloatTensor[N, L, V].
        input_ids: LongTensor[N, L].
        options: ``temperature``, ``chunk_bytes`` as :func:`token_log_probs`.

    Returns:
        FloatTensor[N, L - 1] (fp32): entry ``t`` is
        ``log p(input_ids[:, t + 1] | input_ids[:, :t + 1])``.
        Pair it with ``mask[:, 1:]`` of a mask over ``input_ids``.
    """
    return token_log_probs(logits[:, :-1], input_ids[:, 1:], **options)


def completion_mask(attention_mask: Tensor, prompt_end: int | Tensor) -> Tensor:
    """Mask of the completion tokens of prompt+completion sequences (no prompt, no padding).

    Covers both common layouts: HF ``generate`` output (prompts left-padded to a common width
    P, then the completions: ``prompt_end = P``) and per-row prompt lengths with right padding
    (``prompt_end = LongTensor[N]``).

    Args:
        attention_mask: BoolTensor[N, L] (or 0/1 ints), true on real (non-padding) tokens.
        prompt_end: index of the first completion token, one int for all rows or LongTensor[N].

    Returns:
        BoolTensor[N, L]: true where position >= prompt_end and the token is real.
    """
    check_ndim("attention_mask", attention_mask, 2)
    n, length = attention_mask.shape
    pos = torch.arange(length, device=attention_mask.device).unsqueeze(0)
    end = torch.as_tensor(prompt_end, device=attention_mask.device).reshape(-1, 1)
    if end.shape[0] not in (1, n):
        raise ValueError(f"prompt_end has {end.shape[0]} entries for {n} rows")
    return as_bool_mask(attention_mask) & (pos >= end)


def mask_after_eos(completion_ids: Tensor, eos_token_ids: int | Iterable[int]) -> Tensor:
    """Mask of completion tokens up to and including the first end-of-sequence token.

    Tokens after the first EOS are padding (generate keeps emitting pad/EOS after a row ends);
    the EOS itself is kept, since the policy chose to stop and that choice is trained.

    Args:
        completion_ids: LongTensor[N, T], the generated tokens only.
        eos_token_ids: one id or several (e.g. ``<|im_end|>`` and ``<|endoftext|>``).

    Returns:
        BoolTensor[N, T].
    """
    check_ndim("completion_ids", completion_ids, 2)
    ids = [eos_token_ids] if isinstance(eos_token_ids, int) else list(eos_token_ids)
    is_eos = torch.isin(completion_ids, torch.tensor(ids, device=completion_ids.device))
    # Number of EOS strictly before each position: 0 means "still inside the completion".
    eos_before = torch.cumsum(is_eos.long(), dim=1) - is_eos.long()
    return eos_before == 0


def lengths_to_mask(lengths: Tensor, width: int) -> Tensor:
    """``mask[i, t] = t < lengths[i]`` for right-padded completions.

    Args:
        lengths: LongTensor[N], tokens per completion (0 <= lengths <= width).
        width: T, the padded width.

    Returns:
        BoolTensor[N, width].
    """
    check_ndim("lengths", lengths, 1)
    return torch.arange(width, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(-1)
