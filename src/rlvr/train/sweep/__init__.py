"""``rlvr sweep``: run the same job under several settings, one after another, and compare
them side by side (R15).

A sweep is written as ordinary ``--set`` overrides where a value with a *top-level* comma is a
swept axis::

    rlvr sweep -c configs/arithmetic.yaml --set algo.kl_coef=0.001,0.003,0.01,0.03 --steps 100

Every variant is a normal run (``Run(config, OUT/<variant name>).train()``: config.yaml,
metrics.jsonl, validation.jsonl, checkpoints/, results.json ...). All variants share the seed,
data and every other setting, so only the swept values differ. When they are done the sweep
writes, in ``OUT``:

- ``sweep.json``: the settings of the sweep and one summary per variant (run order);
- ``sweep.png``: a row of panels (reward, KL, validation pass@1, completion length against the
  GRPO step), one line per variant;
- ``sweep.md``: a markdown table of the summaries, best final pass@1 first.

Variants whose ``results.json`` already exists are not run again, so re-running an
interrupted sweep's command finishes it (a variant cut off mid-run resumes from its latest
checkpoint).

Modules: :mod:`~rlvr.train.sweep.spec` (the swept overrides -> variants, their names and
configs), :mod:`~rlvr.train.sweep.runner` (running them:
:func:`~rlvr.train.sweep.runner.run_sweep`) and :mod:`~rlvr.train.sweep.summary` (the
summaries, table, plot and the files above). Nothing is imported here.
"""
