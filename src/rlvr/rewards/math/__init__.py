"""Math answer verifier (R3, R6, R7, R8).

Public API (in :mod:`rlvr.rewards.math.verifier`): :func:`verify_math`, :func:`extract_answer`,
:func:`reference_answer`, :class:`MathVerifyConfig`. Modules:

- finding the final answer: :mod:`.extract` (the order of evidence), :mod:`.boxes`
  (``\\boxed``), :mod:`.phrases` (answers stated in prose), :mod:`.sentences` (a sentence's
  value);
- reading it: :mod:`.normalize` (string/LaTeX canonicalisation), :mod:`.numbers` (exact
  numeric parsing), :mod:`.numwords`, :mod:`.clock`, :mod:`.units`, :mod:`.structure` (answer
  shapes: lists, intervals, equations...);
- comparing it: :mod:`.equivalence` (the dispatch on shapes), :mod:`.outcome` (its result and
  tolerance policy), :mod:`.scalars` (single values, the numeric tolerance), :mod:`.sequences`,
  :mod:`.matrices`, :mod:`.realsets` (equations, sets of reals), :mod:`.symbolic` (guarded
  sympy).

The package itself imports nothing, so that importing one of its light modules (``extract``,
``normalize``) does not load sympy.
"""
