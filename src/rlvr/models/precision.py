"""The precision policy: which dtype every compute path runs in, chosen from the hardware.

``model.precision`` is ``auto`` (default), ``bf16`` or ``fp32``. ``auto`` picks bf16 only where
the device computes it natively:

- a CPU with AVX512-BF16 or AMX *and* ATen dispatching its AVX-512 kernels (on such CPUs
  oneDNN's bf16 matmuls run ~3-4x faster than fp32: measured 1273 vs 361 GFLOP/s on an
  Intel Xeon with AMX, 2 threads);
- a CUDA device with bf16 support (Ampere or newer).

Everywhere else (AVX2-only x86: most laptops, AMD Zen 2/3; ARM; a CPU whose ATen dispatch is
capped below AVX-512, e.g. ``ATEN_CPU_CAPABILITY=avx2``) torch *emulates* bf16, about 85x
slower than fp32 (measured: 1.0-1.3 vs 111-139 GFLOP/s for 1024^3 matmuls on 2 threads), so
``auto`` picks fp32. Forcing ``bf16`` there runs, after a one-line warning.

One choice governs every path (SFT, the GRPO update's autocast, the rollout engine's weight
snapshot and kernels, the KL reference, validation, ``rlvr eval``, ``rlvr serve``,
``rlvr data stratify`` and the benchmarks); master weights, log-probs, advantages and KL stay
fp32 in both (R13). The probe is :func:`probe_capability`; tests inject another by passing
``capability=`` or by replacing this module's ``probe_capability``.
"""

from __future__ import annotations

import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

Precision = Literal["auto", "bf16", "fp32"]
PRECISIONS: tuple[str, ...] = ("auto", "bf16", "fp32")

# Measured ratios of emulated bf16 to fp32 matmul time (1024^3, 2 threads) on AVX2-only CPUs:
# AMD EPYC (AVX2) 111 / 1.3 GFLOP/s, Intel Xeon capped to AVX2 139 / 1.0 GFLOP/s.
EMULATED_BF16_SLOWDOWN = 85


@dataclass(frozen=True)
class DeviceCapability:
    """What the compute device can do, as far as precision is concerned.

    Attributes:
        device: ``"cpu"`` or ``"cuda"``.
        name: the CPU model name (``/proc/cpuinfo``) or the GPU name.
        isa: ATen's CPU dispatch level (``torch.backends.cpu.get_cpu_capability()``: ``AVX2``,
            ``AVX512``, ``DEFAULT``, ``SVE256`` ...) or the CUDA compute capability (``sm_90``).
        native_bf16: whether bf16 matmuls run in hardware.
        reason: one line saying why ``native_bf16`` is what it is.
    """

    device: str
    name: str
    isa: str
    native_bf16: bool
    reason: str


@dataclass(frozen=True)
class PrecisionChoice:
    """The resolved precision of a run or a command.

    Attributes:
        requested: what the config asked for (``auto`` / ``bf16`` / ``fp32``).
        precision: ``bf16`` or ``fp32``.
        capability: the probed device.
        reason: why this precision (one line, printed at start and saved in results.json).
        warning: set when bf16 was forced on a device that only emulates it.
    """

    requested: str
    precision: str
    capability: DeviceCapability
    reason: str
    warning: str | None = None

    @property
    def bf16(self) -> bool:
        """True when compute runs in bf16 (autocast / bf16 weight snapshots)."""
        return self.precision == "bf16"

    @property
    def dtype(self) -> torch.dtype:
        """The compute dtype: ``torch.bfloat16`` or ``torch.float32``."""
        return torch.bfloat16 if self.bf16 else torch.float32

    def summary(self) -> str:
        """``precision fp32 (auto: ...); CPU ... (ATen AVX2)`` for logs and benchmark headers."""
        cap = self.capability
        return (f"precision {self.precision} ({self.requested}: {self.reason}); "
                f"{cap.device} {cap.name} ({'ATen ' if cap.device == 'cpu' else ''}{cap.isa})")

    def as_dict(self) -> dict:
        """JSON-ready record (results.json ``precision``)."""
        cap = self.capability
        return {"requested": self.requested, "precision": self.precision, "reason": self.reason,
                "warning": self.warning, "device": cap.device, "device_name": cap.name,
                "isa": cap.isa, "native_bf16": cap.native_bf16}


@functools.cache
def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (or ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "cpu model", "hardware")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _onednn_isa_capped() -> bool:
    """Whether ``ONEDNN_MAX_CPU_ISA`` keeps oneDNN below its bf16 instruction sets."""
    cap = os.environ.get("ONEDNN_MAX_CPU_ISA", "").strip().upper()
    return bool(cap) and cap not in ("ALL", "DEFAULT") and "BF16" not in cap and "AMX" not in cap


def probe_cpu() -> DeviceCapability:
    """Probe the CPU: native bf16 needs AVX512-BF16 or AMX-BF16 in the CPUID flags, ATen
    dispatching its AVX-512 kernels, and oneDNN not capped below its bf16 ISAs."""
    isa = torch.backends.cpu.get_cpu_capability()
    amx = bool(getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)())
    avx512_bf16 = bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())
    flags = "+".join(n for n, ok in (("AVX512-BF16", avx512_bf16), ("AMX", amx)) if ok)
    if not flags:
        return DeviceCapability("cpu", cpu_name(), isa, False,
                                "no AVX512-BF16 or AMX: torch emulates bf16")
    if not isa.startswith("AVX512"):
        return DeviceCapability("cpu", cpu_name(), isa, False,
                                f"{flags} present but ATen dispatches {isa} kernels")
    if _onednn_isa_capped():
        return DeviceCapability("cpu", cpu_name(), isa, False,
                                f"{flags} present but ONEDNN_MAX_CPU_ISA="
                                f"{os.environ['ONEDNN_MAX_CPU_ISA']}")
    return DeviceCapability("cpu", cpu_name(), isa, True, f"{flags}: native bf16 matmuls")


def probe_cuda() -> DeviceCapability:
    """Probe the current CUDA device (bf16 is native from compute capability 8.0).

    Raises:
        RuntimeError: no CUDA device.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device")
    major, minor = torch.cuda.get_device_capability()
    native = bool(torch.cuda.is_bf16_supported())
    return DeviceCapability("cuda", torch.cuda.get_device_name(), f"sm_{major}{minor}", native,
                            "CUDA bf16 supported" if native else "CUDA device without bf16")


def probe_capability(device: str = "cpu") -> DeviceCapability:
    """The capability of ``device`` (``"cpu"`` or ``"cuda"``).

    Raises:
        ValueError: another device name. RuntimeError: ``cuda`` without a CUDA device.
    """
    if device == "cpu":
        return probe_cpu()
    if device == "cuda":
        return probe_cuda()
    raise ValueError(f"unknown device {device!r}; expected 'cpu' or 'cuda'")


def resolve_precision(requested: str = "auto", capability: DeviceCapability | None = None,
                      device: str = "cpu") -> PrecisionChoice:
    """Resolve ``model.precision`` against the device.

    Args:
        requested: ``auto``, ``bf16`` or ``fp32``.
        capability: the device's capability; default :func:`probe_capability` of ``device``.
        device: which device to probe when ``capability`` is not given.

    Returns:
        the choice; ``warning`` is set when ``bf16`` is forced on a device without native bf16.

    Raises:
        ValueError: ``requested`` is not one of :data:`PRECISIONS`.
    """
    if requested not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {requested!r}")
    cap = capability if capability is not None else probe_capability(device)
    if requested == "fp32":
        return PrecisionChoice(requested, "fp32", cap, "fp32 requested")
    if requested == "bf16":
        warning = None
        if not cap.native_bf16:
            warning = (f"precision bf16 forced on a device without native bf16 ({cap.reason}): "
                       f"expect matmuls ~{EMULATED_BF16_SLOWDOWN}x slower than fp32; "
                       f"model.precision: auto picks fp32 here")
        return PrecisionChoice(requested, "bf16", cap, "bf16 requested", warning)
    precision = "bf16" if cap.native_bf16 else "fp32"
    return PrecisionChoice(requested, precision, cap, cap.reason)

