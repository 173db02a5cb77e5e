"""Math answer verifier (R3, R6, R7, R8).

Public API (in :mod:`rlvr.rewards.math.verifier`): :func:`verify_math`, :func:`extract_answer`,
:func:`reference_answer`, :class:`MathVerifyConfig`. Modules: :mod:`.extract` (finding the final
answer), :mod:`.normalize` (string/LaTeX canonicalisation), :mod:`.numbers` (exact numeric
parsing), :mod:`.structure` (answer shapes: lists, intervals, equations...),
:mod:`.equivalence` (comparison rules and tolerance policy), :mod:`.symbolic` (guarded sympy).
The package itself imports nothing, so that importing one of its light modules (``extract``,
``normalize``) does not load sympy.
"""
