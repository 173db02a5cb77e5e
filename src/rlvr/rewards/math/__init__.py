"""Math answer verifier (R3, R6, R7, R8).

Public API (in :mod:`rlvr.rewards.math.verifier`): :func:`verify_math`, :func:`extract_answer`,
:func:`reference_answer`, :class:`MathVerifyConfig`. Modules: :mod:`.extract` (finding the final
answer), :mod:`.normalize` (string/LaTeX canonicalisation), :mod:`.numbers` (exact numeric
parsing), :mod:`.structure` (answer shapes: lists, intervals, equations...),
:mod:`.equivalence` (comparison rules and tolerance policy), :mod:`.symbolic` (guarded sympy).
Attributes are imported lazily so that importing the package does not load sympy.
"""

__all__ = ["MathVerifyConfig", "extract_answer", "reference_answer", "verify_math"]


def __getattr__(name: str):
    if name in __all__:
        from rlvr.rewards.math import verifier

        return getattr(verifier, name)
    raise AttributeError(name)
