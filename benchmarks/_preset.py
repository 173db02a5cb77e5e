"""Shared setup of the per-step benchmarks: a preset's run up to its first GRPO step."""

from __future__ import annotations

import argparse
import copy
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


def grpo_step_for(config, engine_name: str, shared_prefix: str = "step", prefix: str = "rlvr-bench-"):
    """The preset's model, data, SFT cold start and KL reference as in a real run, then the
    :class:`rlvr.train.grpo.GRPOStep` that runs its steps with ``engine_name``.

    Returns:
        ``(run, step, sampler)``: the :class:`rlvr.train.run.Run` (close ``run.rewards`` when
        done), the step runner and the run's task sampler.
    """
    from rlvr.train.grpo import GRPOStep
    from rlvr.train.run import Run

    config = config.model_copy(deep=True)
    config.rollout.engine = engine_name
    config.grpo.shared_prefix = shared_prefix
    run = Run(config, Path(tempfile.mkdtemp(prefix=prefix)))
    run.load()
    run._engine = run.engine()
    if config.sft.enabled:
        run.sft()
    run._optimizer_for_grpo()
    reference = None
    if config.algo.kl_coef > 0:
        reference = copy.deepcopy(run.policy).eval().requires_grad_(False)
    step = GRPOStep(config, run.policy, reference, run._engine, run.tokenizer, run.rewards,
                    run.optimizer, run.scheduler, run.stop_ids)
    return run, step, run.sampler()
