"""Evaluation and test-time compute: ``rlvr eval``.

- :mod:`rlvr.eval.metrics`: pass@k, maj@k, best-of-k, aggregators, saturation.
- :mod:`rlvr.eval.records`: scored samples and problems; the ``--completions`` file format.
- :mod:`rlvr.eval.sampling`: n completions per problem from a sampler (and the online
  budget ``--timeout``).
- :mod:`rlvr.eval.engine_sampler`: sampling a local model through a rollout engine (torch),
  and the trainer's sampled pass@k.
- :mod:`rlvr.eval.summary`: per-model results (curves, cost, breakdowns).
- :mod:`rlvr.eval.report`: results.json, the markdown table, the plots.
- :mod:`rlvr.eval.probe`: the sycophancy probe (R33).
- :mod:`rlvr.eval.lengths`: the length tool (R19).
- :mod:`rlvr.eval.data`: the task data evaluated (a run config's data section + the options).
- :mod:`rlvr.eval.prompts`: how each model is prompted, and where that came from.
- :mod:`rlvr.eval.evaluate`: the ``rlvr eval`` job.
"""
