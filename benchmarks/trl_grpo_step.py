"""Seconds per GRPO step, rlvr vs TRL's ``GRPOTrainer``, same run, same CPU; reward curve of both.

Both sides train the same starting model (``--model``, e.g. ``runs/<run>/sft_model``; default
the preset's model, no SFT here) on the same prompts in the same order (the preset's arithmetic
tasks, ``rlvr.tasks.arithmetic.generate``, chat-formatted as ``rlvr.tasks.prompting`` builds
them, drawn by the run's own task sampler), with the same reward (rlvr's
``RewardPipeline``, wrapped for TRL as ``reward(completions, reference, task_type, **kw)``), the
same group size G, prompts per step, max new tokens, temperature / top-p, learning rate
(constant), clip epsilon, gradient clip, loss aggregation and group std scaling, and no KL term
(beta = 0: with beta > 0 TRL reloads a reference model from the model's folder).

- rlvr: as a run does it (``rlvr.train.grpo.GRPOStep`` over ``rlvr.train.run.Run``'s setup:
  the ``torch`` rollout engine and the shared-prefix policy forward in the run's precision:
  ``model.precision`` resolved on this CPU, fp32 on AVX2-only CPUs, bf16 where it is native).
- TRL (>= 1.0; measured with 1.16): ``GRPOTrainer`` on CPU (``use_cpu=True, bf16=False``, so
  fp32), transformers ``generate`` for the rollout, ``per_device_train_batch_size`` = prompts x G
  completions (one generation and one optimizer step per step), the dataset in rlvr's order
  (``shuffle_dataset=False``), gradient checkpointing off (TRL's default is on; off is faster
  for a 135M model), dropout off. Step time: TrainerCallback ``on_step_begin`` ->
  ``on_step_end`` (rollout, reward, update).

Equal work: both sides must train the same rows. With the arithmetic reward and no SFT
checkpoint every completion scores 0, and rlvr skips a step whose groups have no reward
variance while TRL still runs its forward and backward. So ``--reward`` picks the reward both
sides use: ``pipeline`` (rlvr's reward pipeline; for an SFT checkpoint, ``--model``) or
``even-chars`` (the share of a completion's characters whose code point is even: an arbitrary
reward with variance inside every group, computed from the same decoded text on both sides;
the default without ``--model`` and in ``--quick``). Before the ratio the benchmark prints the
rows trained and completion tokens per timed step of each side, and whether the rows match.

The first step of each side is a warm-up and is not counted (the figure is the median of the
others). Defaults: 4 prompts x G = 8, 64 new tokens, 20 steps a side: about 20 minutes (TRL
took ~49 s a step on this workload with SmolLM2-135M). ``--quick``: 2 steps a side, 2 prompts x
G = 4, 32 new tokens, the same model.

Usage: python benchmarks/trl_grpo_step.py [--quick] [--steps 20] [--model runs/<run>/sft_model]
  [--reward pipeline|even-chars] [--prompts 4] [--group-size 8] [--max-new-tokens 64] [--lr 5e-6]
  [--config configs/arithmetic.yaml] [--set KEY=VALUE ...]
Needs TRL: ``pip install trl`` (in the ``bench`` extra). Never time two heavy jobs at once on
this machine: results swing 2-5x.
Last lines: ``work per timed step: rlvr R rows, T tokens; trl R rows, T tokens (equal rows:
yes|no)``, then ``grpo step s: rlvr X, trl Y, ratio Z.ZZx (rlvr / trl: below 1, rlvr is
faster)``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
TRL_LOSS_TYPES = {"grpo", "dr_grpo", "dapo", "bnpo"}  # rlvr loss_agg names TRL shares


def import_trl():
    """Import TRL and ``datasets`` (its dependency), or exit with how to install them."""
    try:
        import datasets  # noqa: F401
        import trl
    except ImportError as exc:
        raise SystemExit(f"this benchmark needs TRL: pip install trl (or pip install -e "
                         f"'.[bench]'); import failed: {exc}") from exc
    return trl


def build_config(args):
    """The run config both sides use: the preset with this benchmark's workload."""
    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig

    config = load_config(RunConfig, Path(args.config), args.sets)
    g = config.grpo
    g.prompts_per_step, g.group_size = args.prompts, args.group_size
    g.max_new_tokens = args.max_new_tokens
    g.steps = args.steps
    if args.lr is not None:
        g.learning_rate = args.lr
    if args.model:
        config.model.name = args.model
    config.sft.enabled = False  # both start from the same (already SFT'd, if given) weights
    config.algo.kl_coef = 0.0
    config.model.lora_rank = 0
    return config


def check_comparable(config) -> None:
    """Refuse settings TRL cannot mirror, rather than compare different algorithms."""
    a, g = config.algo, config.grpo
    problems = []
    if a.loss_agg not in TRL_LOSS_TYPES:
        problems.append(f"algo.loss_agg={a.loss_agg}")
    if a.advantage != "grpo" or a.policy_loss != "clip":
        problems.append(f"algo.advantage={a.advantage}, algo.policy_loss={a.policy_loss}")
    if g.mu != 1:
        problems.append(f"grpo.mu={g.mu}")
    if problems:
        raise SystemExit("no TRL equivalent for " + ", ".join(problems))


def draw_batches(run, steps: int) -> list[list[int]]:
    """Task indices of each step, drawn up front by the run's own sampler (same order for both
    sides)."""
    sampler = run.sampler()
    return [sampler.next(run.config.grpo.prompts_per_step) for _ in range(steps)]


def run_rlvr(run, batches: list[list[int]], rewards) -> list[dict]:
    """rlvr's GRPO steps over ``batches`` scored by ``rewards`` (a reward pipeline); per step:
    wall seconds, reward, rows trained, completions and their mean length."""
    from rlvr.train import setup

    config = run.config
    setup.open_engine(run.state, config)
    setup.grpo_optimizer(run.state, config)
    # a fresh sampler of the same seed: its rollout source draws ``batches`` again, in order
    setup.open_sampler(run.state, config)
    step = setup.step_runner(run.state, config, run.run_dir, rewards, resume=False)
    rows = []
    for i, idx in enumerate(batches):
        t0 = time.perf_counter()
        batch = step.run(run.state, i + 1)
        assert [t.id for t in batch.tasks] == [run.state.data.train_tasks[j].id for j in idx]
        wall = time.perf_counter() - t0
        m = batch.metrics
        rows.append({"wall": wall, "reward": m["reward_mean"], "length": m["length_mean"],
                     "rows": m["train_rows"], "generated": len(batch.results)})
        print(f"  rlvr step {i + 1}{' (warm-up)' if i == 0 else ''}: {wall:.2f} s = rollout "
              f"{m['seconds_rollout']:.2f} + reward {m['seconds_reward']:.2f} + update "
              f"{m['seconds_update']:.2f}; reward {m['reward_mean']:.3f}, length "
              f"{m['length_mean']:.1f}", flush=True)
    return rows


def trl_dataset(run, batches: list[list[int]]):
    """The prompts of ``batches`` in order, as TRL conversational rows with the reference and
    task type as extra columns (the reference JSON-encoded: one column type for all tasks)."""
    from datasets import Dataset
    from datasets.table import InMemoryTable

    from rlvr.tasks.prompting import chat_messages

    rows = []
    for idx in batches:
        for j in idx:
            task = run.state.data.train_tasks[j]
            rows.append({"prompt": chat_messages(task, run.instruction(task),
                                                 run.config.data.one_shot),
                         "reference": json.dumps(task.reference), "task_type": task.task_type})
    # An explicit fingerprint: otherwise datasets hashes the table with dill, which raised
    # PicklingError (pyarrow's MonthDayNano) with datasets 5.2 / dill 0.4.1 / pyarrow 24-26.
    digest = hashlib.sha256(json.dumps(rows, sort_keys=True).encode()).hexdigest()[:16]
    return Dataset(InMemoryTable.from_pylist(rows), fingerprint=f"rlvr-trl-bench-{digest}")


def even_char_share(text: str) -> float:
    """The share of ``text``'s characters whose code point is even (0.0 for empty text): the
    ``even-chars`` reward, which varies inside every group of sampled completions."""
    return sum(ord(c) % 2 == 0 for c in text) / len(text) if text else 0.0


class EvenCharsReward:
    """:func:`even_char_share` with the reward pipeline's interface (``score_batch``,
    ``close``), so rlvr's step scores with it exactly as TRL's reward function does."""

    def score_batch(self, requests, on_result=None):
        from rlvr.rewards.types import RewardResult, Status

        out = []
        for i, request in enumerate(requests):
            share = even_char_share(request.completion)
            out.append(RewardResult(share, {"even_chars": share},
                                    Status.correct if share >= 0.5 else Status.wrong))
            if on_result is not None:
                on_result(i)
        return out

    def close(self) -> None:
        """Nothing to release."""


def make_reward_fn(pipeline):
    """rlvr's reward pipeline as a TRL reward function."""
    from rlvr.rewards.pipeline import ScoreRequest

    def rlvr_reward(completions, reference, task_type, **kwargs) -> list[float]:
        """Score TRL completions (strings, or chat message lists) with rlvr's pipeline."""
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        requests = [ScoreRequest(t, json.loads(r), tt)
                    for t, r, tt in zip(texts, reference, task_type)]
        return [float(r.reward) for r in pipeline.score_batch(requests)]

    return rlvr_reward


def check_same_prompt_ids(run, tokenizer, batches) -> None:
    """Warn when TRL's chat-template tokenization of a prompt differs from rlvr's ids."""
    from rlvr.tasks.prompting import chat_messages

    j = batches[0][0]
    task = run.state.data.train_tasks[j]
    encoded = tokenizer.apply_chat_template(
        chat_messages(task, run.instruction(task), run.config.data.one_shot),
        add_generation_prompt=True, tokenize=True)
    ids = list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)
    if ids != list(run.state.data.train_prompts[j]):
        print(f"  note: TRL's prompt tokenization differs from rlvr's ({len(ids)} vs "
              f"{len(run.state.data.train_prompts[j])} tokens)", flush=True)


def run_trl(run, batches: list[list[int]], out_dir: Path, rewards) -> list[dict]:
    """TRL GRPOTrainer steps over the same prompts scored by ``rewards``; per step: wall
    seconds, reward, rows trained (all of them), completions and their mean length."""
    trl = import_trl()
    from transformers import PrinterCallback, TrainerCallback

    from rlvr.models import load_model_and_tokenizer

    config = run.config
    g, a = config.grpo, config.algo
    model, tokenizer = load_model_and_tokenizer(config.model.name, seed=config.seed)
    check_same_prompt_ids(run, tokenizer, batches)
    rows: list[dict] = []

    class StepClock(TrainerCallback):
        """Wall seconds of each optimizer step and the reward TRL logs for it."""

        def on_step_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            rows.append({"wall": time.perf_counter() - self.t0})

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "reward" in logs and rows:
                row = rows[-1]
                row["reward"] = logs["reward"]
                row["length"] = logs.get("completions/mean_length", float("nan"))
                row["rows"] = row["generated"] = g.prompts_per_step * g.group_size
                i = len(rows)
                print(f"  trl step {i}{' (warm-up)' if i == 1 else ''}: {row['wall']:.2f} s; "
                      f"reward {row['reward']:.3f}, length {row['length']:.1f}", flush=True)

    args = trl.GRPOConfig(
        output_dir=str(out_dir), use_cpu=True, bf16=False, fp16=False, seed=config.seed,
        per_device_train_batch_size=g.prompts_per_step * g.group_size,
        gradient_accumulation_steps=1, num_generations=g.group_size,
        max_completion_length=g.max_new_tokens, temperature=g.temperature, top_p=g.top_p,
        learning_rate=g.learning_rate,
        lr_scheduler_type="constant_with_warmup" if g.warmup_steps else "constant",
        warmup_steps=g.warmup_steps, weight_decay=g.weight_decay, max_grad_norm=g.max_grad_norm,
        beta=0.0, num_iterations=1, epsilon=a.clip_eps, loss_type=a.loss_agg,
        scale_rewards=a.std_scale, mask_truncated_completions=a.mask_truncated,
        max_steps=len(batches), shuffle_dataset=False, gradient_checkpointing=False,
        disable_dropout=True, logging_steps=1, save_strategy="no", report_to="none",
        disable_tqdm=True, log_completions=False, dataloader_num_workers=0,
    )
    trainer = trl.GRPOTrainer(model=model, reward_funcs=[make_reward_fn(rewards)],
                              args=args,
                              train_dataset=trl_dataset(run, batches),
                              processing_class=tokenizer, callbacks=[StepClock()])
    trainer.remove_callback(PrinterCallback)  # StepClock prints the step lines instead
    trainer.train()
    return rows


def work_line(rlvr_rows: list[dict], trl_rows: list[dict]) -> str:
    """Rows trained and completion tokens per timed step (means without the warm-up) of both
    sides, and whether they trained the same rows."""
    def mean(rows, key):
        timed = rows[1:] or rows
        return sum(r.get(key, float("nan")) for r in timed) / max(len(timed), 1)

    sides = {}
    for name, rows in (("rlvr", rlvr_rows), ("trl", trl_rows)):
        sides[name] = (mean(rows, "rows"), mean(rows, "length") * mean(rows, "generated"))
    equal = "yes" if sides["rlvr"][0] == sides["trl"][0] else "no"
    return (f"work per timed step: rlvr {sides['rlvr'][0]:.0f} rows, {sides['rlvr'][1]:.0f} "
            f"tokens; trl {sides['trl'][0]:.0f} rows, {sides['trl'][1]:.0f} tokens (equal rows: "
            f"{equal}; tokens are each side's own samples)")


def median_wall(rows: list[dict]) -> float:
    """Median step seconds without the warm-up step (the only step when there is one)."""
    timed = rows[1:] or rows
    return statistics.median(r["wall"] for r in timed)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run both sides on the same batches, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 steps a side, 2 prompts x G=4, 32 new tokens")
    parser.add_argument("--steps", type=int, default=20,
                        help="GRPO steps per side, the first a warm-up (default 20)")
    parser.add_argument("--model", default=None,
                        help="starting model for both (e.g. runs/<run>/sft_model); default: "
                             "the preset's model")
    parser.add_argument("--reward", choices=["pipeline", "even-chars"], default=None,
                        help="the reward both sides use (default: pipeline with --model, "
                             "else even-chars, which has variance without an SFT checkpoint)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts per step (default 4)")
    parser.add_argument("--group-size", type=int, default=8, help="G (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="default 64")
    parser.add_argument("--lr", type=float, default=None, help="default: the preset's")
    parser.add_argument("--config", default=str(ROOT / "configs" / "arithmetic.yaml"))
    parser.add_argument("--set", dest="sets", action="append", default=[],
                        help="config override KEY=VALUE (repeatable)")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.prompts, args.group_size, args.max_new_tokens = 2, 2, 4, 32
    if args.reward is None:
        args.reward = "even-chars" if args.quick or not args.model else "pipeline"
    if args.steps < 2:
        parser.error("--steps must be >= 2 (the first step is a warm-up)")
    import_trl()  # fail before any model is loaded

    from rlvr.train.run import Run

    config = build_config(args)
    check_comparable(config)
    g = config.grpo
    from _machine import machine_line

    print(machine_line(config.model.precision) + " (rlvr; TRL runs fp32)")
    print(f"model {config.model.name}: {g.prompts_per_step} prompts x G={g.group_size}, max "
          f"{g.max_new_tokens} new tokens, lr {g.learning_rate:g}, loss {config.algo.loss_agg}, "
          f"beta 0, {args.steps} steps a side (first = warm-up), reward {args.reward} on "
          f"both sides", flush=True)
    work = Path(tempfile.mkdtemp(prefix="rlvr-trl-bench-"))
    run = Run(config, work / "rlvr")
    run.load()
    rewards = EvenCharsReward() if args.reward == "even-chars" else run.rewards
    batches = draw_batches(run, args.steps)
    try:
        rlvr_rows = run_rlvr(run, batches, rewards)
        from rlvr.train.state import ModelState, OptimState

        # free rlvr's models and optimizer before TRL's copy
        run.state.models, run.state.optim = ModelState(), OptimState()
        trl_rows = run_trl(run, batches, work / "trl", rewards)
    finally:
        run.rewards.close()

    nan = float("nan")
    print("step  rlvr s  rlvr reward  trl s  trl reward")
    for i in range(max(len(rlvr_rows), len(trl_rows))):
        r = rlvr_rows[i] if i < len(rlvr_rows) else {}
        t = trl_rows[i] if i < len(trl_rows) else {}
        print(f"{i + 1:4d}  {r.get('wall', nan):6.2f}  {r.get('reward', nan):11.3f}"
              f"  {t.get('wall', nan):5.1f}  {t.get('reward', nan):10.3f}")
    print(work_line(rlvr_rows, trl_rows))
    rlvr_s, trl_s = median_wall(rlvr_rows), median_wall(trl_rows)
    print(f"grpo step s: rlvr {rlvr_s:.2f}, trl {trl_s:.2f}, ratio {rlvr_s / trl_s:.2f}x "
          f"(rlvr / trl: below 1, rlvr is faster)")


if __name__ == "__main__":
    sys.exit(main())
