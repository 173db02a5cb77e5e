"""The header line every benchmark prints first: which CPU class and precision its figures
come from (figures from a CPU with native bf16 and from an AVX2-only CPU are not comparable)."""

from __future__ import annotations


def machine_line(precision: str | None = "auto") -> str:
    """``cpu NAME (ATen ISA, native bf16 yes/no), threads T[, precision P (reason)]``.

    Args:
        precision: ``auto`` / ``bf16`` / ``fp32`` to resolve and report
            (:func:`rlvr.models.precision.resolve_precision`), or None for benchmarks that run
            no model (verifiers, sandbox).
    """
    import torch

    from rlvr.models.precision import probe_cpu, resolve_precision

    cap = probe_cpu()
    line = (f"cpu {cap.name} (ATen {cap.isa}, native bf16 {'yes' if cap.native_bf16 else 'no'}), "
            f"threads {torch.get_num_threads()}")
    if precision is not None:
        choice = resolve_precision(precision, cap)
        line += f", precision {choice.precision} ({choice.requested}: {choice.reason})"
    return line
