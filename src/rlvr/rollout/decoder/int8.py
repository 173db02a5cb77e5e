"""int8 matmuls of the ``torch`` engine (``quantization="int8"``, ``rollout.quantization:
int8``): weights quantised to int8 once per weight snapshot, activations quantised on the fly
(dynamic quantisation through fbgemm, :class:`Int8Linear`).

Why: on a CPU without native bf16 (AVX2-only x86) the rollout runs in fp32, and a decode step's
matmuls stream every weight once per step; int8 weights are a quarter of fp32's bytes and
fbgemm's AVX2 int8 kernels (``vpmaddubsw``) do 4x the multiply-adds per instruction (measured
on an AMD EPYC, AVX2, 2 threads, batch 64: the decode step's linear layers 178 -> 118 ms).

Numerics (``y ~= x @ W^T + b``, fp32 in and out), chosen by measurement on the default model
(SmolLM2-135M; KL(fp32 || int8) of the next-token distribution after six prompts, mean over
them; argmax agreement):

- weight: symmetric per-output-channel 7-bit codes, ``W[o] ~= s_o * q[o]`` with
  ``s_o = max_i |W[o, i]| / 63`` and ``q = round(W / s)`` in [-63, 63] (zero point 0);
- activation: each row is divided by its max |value| ``a_r`` (so every row uses the whole
  code range), then fbgemm quantises the tensor dynamically to 8-bit uint8 codes (one affine
  scale / zero point from its min / max, ~[-1, 1]: 2 / 255 per code) and the output row is
  multiplied back by ``a_r``;
- accumulation in int32, ``y = a_r * s_x * s_o * (acc - z_x * sum_i q[o, i]) + b`` in fp32.

Why 7-bit weights with 8-bit activations: AVX2's ``vpmaddubsw`` adds two uint8 x int8
products in int16 with saturation, so 8-bit activations need weights within +-63 (2 * 255 *
63 < 2^15); the alternative, fbgemm's ``reduce_range`` (7-bit activations, 8-bit weights),
measured 10x the KL (0.48 vs 0.043) because activations, not weights, carry the outliers.
Without the per-row scale (one scale for the whole batch, fbgemm's default) the KL was 1.0
(a long prompt's or the first token's large activations coarsen every other row's codes).
The scale makes a row's outputs (almost) independent of the other rows of its batch: only
the tensor's min / max, which are -1 and 1 as soon as two rows' largest values have opposite
signs, is shared.

The sampler's log-probs still differ from the trainer's fp32 ones (``rollout_logprob_gap``);
truncated importance sampling (:func:`rlvr.algo.importance.truncated_importance_weights`,
``algo.tis_cap``) corrects the policy gradient for it.

fbgemm needs ``torch.ops.quantized`` with the ``fbgemm`` or ``x86`` quantized engine
(:func:`check_int8_available`); torch 2.10+ warns that its quantized tensor constructors are
deprecated (the warning is silenced here: the op this module needs is a free function of
``torch.ops.quantized``, checked at engine construction).
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor

#: The int8 quantisation modes the ``torch`` engine implements (``"none"``: compute dtype).
QUANTIZATIONS: tuple[str, ...] = ("none", "int8")

_ENGINES = ("x86", "fbgemm")  # torch.backends.quantized engines with fbgemm's dynamic linear
_QMAX = 63  # 7-bit weight codes: see the module doc


class Int8Unavailable(RuntimeError):
    """This torch build cannot run the int8 rollout matmuls (no fbgemm / x86 quantized
    engine); the message says what to use instead."""


def check_int8_available() -> None:
    """Raise :class:`Int8Unavailable` unless this torch build has fbgemm's dynamic int8 linear
    (``torch.backends.quantized.supported_engines`` holds ``x86`` or ``fbgemm``: x86-64
    builds; ARM builds ship only ``qnnpack``) and selects one of them."""
    supported = _supported_engines()
    if not any(e in supported for e in _ENGINES):
        raise Int8Unavailable(
            f"rollout.quantization: int8 needs torch's fbgemm quantized engine (x86 or "
            f"fbgemm), but this torch build supports {supported}; use rollout.quantization: "
            f"none")
    if torch.backends.quantized.engine not in _ENGINES:
        torch.backends.quantized.engine = next(e for e in _ENGINES if e in supported)


def _supported_engines() -> list[str]:
    """This torch build's quantized engines (a seam for the test of the refusal)."""
    return list(torch.backends.quantized.supported_engines)


def quantize_per_channel(weight: Tensor) -> tuple[Tensor, Tensor]:
    """Symmetric per-output-channel 7-bit codes of ``weight`` (stored as int8).

    Args:
        weight: FloatTensor[out, in].

    Returns:
        ``(codes, scales)``: int8 Tensor[out, in] in [-63, 63] and FloatTensor[out] (fp32,
        > 0), with ``weight ~= codes * scales[:, None]`` (each error at most ``scales / 2``;
        ``scales = max |row| / 63``).
        An all-zero row gets scale 1 (its codes are 0).
    """
    w = weight.detach().float()
    amax = w.abs().amax(dim=1)
    scales = torch.where(amax > 0, amax / _QMAX, torch.ones_like(amax))
    codes = torch.round(w / scales[:, None]).clamp_(-_QMAX, _QMAX).to(torch.int8)
    return codes, scales


class Int8Linear:
    """``y = x @ W^T (+ b)`` with ``W`` quantised per output channel, prepacked for fbgemm, and
    ``x`` quantised per call with a per-row scale (see the module doc for the arithmetic).

    Args:
        weight: FloatTensor[out, in] (any float dtype; quantised from its fp32 values).
        bias: FloatTensor[out] or None (kept in fp32, added after the int8 product).

    Attributes:
        out_features: ``out``.
        packed: fbgemm's packed int8 weight with its scales.
        bias: the fp32 bias or None.

    Raises:
        Int8Unavailable: from :func:`check_int8_available`.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None):
        check_int8_available()
        self.out_features = weight.shape[0]
        codes, scales = quantize_per_channel(weight)
        zero_points = torch.zeros(self.out_features, dtype=torch.long)
        with warnings.catch_warnings():  # torch >= 2.10: quantized tensors are deprecated
            warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*deprecated")
            q = torch._make_per_channel_quantized_tensor(codes, scales.double(), zero_points, 0)
        self.packed = torch.ops.quantized.linear_prepack(q, None)
        self.bias = None if bias is None else bias.detach().float().contiguous()

    def __call__(self, x: Tensor) -> Tensor:
        """``x`` FloatTensor[..., in] (fp32) -> FloatTensor[..., out] (fp32)."""
        flat = x.reshape(-1, x.shape[-1])
        row_max = flat.abs().amax(dim=1, keepdim=True).clamp_(min=torch.finfo(flat.dtype).tiny)
        y = torch.ops.quantized.linear_dynamic(flat / row_max, self.packed, False)  # 8-bit x
        y.mul_(row_max)
        if self.bias is not None:
            y.add_(self.bias)
        return y.view(*x.shape[:-1], self.out_features)
