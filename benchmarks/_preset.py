"""Shared setup of the per-step benchmarks: a preset's run up to its first GRPO step."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "arithmetic.yaml"


def preset_parser(description: str, quick_help: str, steps: int, steps_help: str
                  ) -> argparse.ArgumentParser:
    """The per-step benchmarks' shared options: ``--quick``, ``--config`` (default preset),
    ``--steps`` and repeatable ``--set KEY=VALUE`` overrides."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG))
    parser.add_argument("--steps", type=int, default=steps, help=steps_help)
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        help="config override KEY=VALUE (repeatable)")
    return parser


def quick_config(config):
    """``--quick``'s workload, in place: a 32-example cold start, a quarter of the prompts per
    step, half the group and at most 32 new tokens (the short cold start leaves some
    completions running to the cap), under a minute on a 2-core AVX2-only CPU in fp32.
    Returns ``config``."""
    config.sft.examples = min(config.sft.examples, 32)
    config.grpo.prompts_per_step = max(1, config.grpo.prompts_per_step // 4)
    config.grpo.group_size = max(2, config.grpo.group_size // 2)
    config.grpo.max_new_tokens = min(config.grpo.max_new_tokens, 32)
    return config


def grpo_step_for(config, engine_name: str, shared_prefix: str = "step",
                  prefix: str = "rlvr-bench-"):
    """The preset's model, data, SFT cold start, KL reference, task sampler and rollout
    source as in a real run (:mod:`rlvr.train.setup`), then the
    :class:`rlvr.train.grpo.GRPOStep` that runs its steps with ``engine_name``.

    Returns:
        ``(run, step)``: the :class:`rlvr.train.run.Run` (close ``run.rewards`` when done;
        ``step.run(run.state, i)`` runs step ``i``) and the step runner.
    """
    from rlvr.train import setup
    from rlvr.train.run import Run

    config = config.model_copy(deep=True)
    config.rollout.engine = engine_name
    config.grpo.shared_prefix = shared_prefix
    run = Run(config, Path(tempfile.mkdtemp(prefix=prefix)))
    run.load()
    setup.open_engine(run.state, config)
    if config.sft.enabled:
        run.sft()
    setup.grpo_optimizer(run.state, config)
    setup.open_sampler(run.state, config)
    step = setup.step_runner(run.state, config, run.run_dir, run.rewards, resume=False)
    return run, step
