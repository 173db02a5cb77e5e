"""The header line every benchmark prints first: which CPU class and precision its figures
come from (figures from a CPU with native bf16 and from an AVX2-only CPU are not comparable)."""

from __future__ import annotations


def machine_line(precision: str | None = "auto") -> str:
    """The run's own precision line (:meth:`rlvr.models.precision.PrecisionChoice.summary`:
    precision, why, CPU name and ATen dispatch level) plus the thread count; for benchmarks
    that run no model (``precision=None``: verifiers, sandbox), the CPU part alone.
    """
    import torch

    from rlvr.models.precision import probe_cpu, resolve_precision

    cap = probe_cpu()
    threads = f"threads {torch.get_num_threads()}"
    if precision is None:
        native = "yes" if cap.native_bf16 else "no"
        return f"cpu {cap.name} (ATen {cap.isa}, native bf16 {native}), {threads}"
    return f"{resolve_precision(precision, cap).summary()}, {threads}"
