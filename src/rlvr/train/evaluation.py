"""Evaluation phases of a run: greedy validation (R28; logged to validation.jsonl and
validation_samples.jsonl) and sampled pass@k / maj@k (R29) of the current policy; with an
``env`` section both play episodes (greedy episodes, pass@k over episodes)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlvr.eval.engine_sampler import sampled_pass_at_k
from rlvr.progress import Phase
from rlvr.train.logs import append_log, console
from rlvr.train.policy import sync_engine
from rlvr.train.rollouts import episode_runner
from rlvr.train.state import TrainingState
from rlvr.train.validate import validate, validate_episodes
from rlvr.train.weight_average import averaged


class Evaluator:
    """Evaluates ``state``'s policy (with ``grpo.ema_decay``: its weight average, the run's
    output) on its validation tasks through its rollout engine, scoring with
    ``eval_rewards`` (each task type's own verifier).

    Args:
        config: the run config (``eval`` settings, ``seed``).
        run_dir: where the validation logs go.
        state: the run's state (read at each call: policy, engine, tokenizer, data).
        eval_rewards: the reward pipeline of validation.
    """

    def __init__(self, config, run_dir: Path, state: TrainingState, eval_rewards):
        self.config, self.run_dir, self.state = config, run_dir, state
        self.eval_rewards = eval_rewards
        self._runner = None

    def episodes(self):
        """The :class:`rlvr.envs.runner.EpisodeRunner` of validation (the run's ``env``,
        scoring with ``eval_rewards``), built at first use (the tokenizer is loaded by then);
        ``None`` without an ``env`` section."""
        if self._runner is None and self.config.env is not None:
            self._runner = episode_runner(self.state, self.config, self.eval_rewards)
        return self._runner

    @contextmanager
    def _output_in_engine(self) -> Iterator[None]:
        """For the block: the run's output (the policy, or its weight average with
        ``grpo.ema_decay``) in the policy, in eval mode, synced into the engine (which keeps
        its own weight snapshot); the policy's own weights and train mode after."""
        s = self.state
        s.models.policy.eval()
        with averaged(s.models.average, s.models.policy):
            sync_engine(s.models.engine, s.models.policy)
            yield
        s.models.policy.train()

    def validate(self, label: str, step: int) -> dict:
        """Greedy validation; appends the row (and the first 20 samples) to the run's logs,
        prints a summary and returns the row (``label``, ``step`` and
        :class:`rlvr.train.validate.ValidationResult`'s fields)."""
        s, c = self.state, self.config
        with self._output_in_engine(), Phase(f"validation {label}", len(s.data.val_tasks),
                                             console, unit="problems") as phase:
            extra = {}
            if c.env is None:
                result, samples = validate(
                    s.models.engine, s.models.tokenizer, s.data.val_tasks, s.data.val_prompts,
                    self.eval_rewards, max_new_tokens=c.eval.max_new_tokens,
                    stop_token_ids=s.stop_ids, batch_size=c.eval.batch_size,
                    progress=phase.update)
            else:
                result, samples, extra = validate_episodes(
                    s.models.engine, self.episodes(), s.data.val_tasks,
                    max_new_tokens=c.eval.max_new_tokens, stop_token_ids=s.stop_ids,
                    batch_size=c.eval.batch_size, progress=phase.update)
        row = {"label": label, "step": step, **result.__dict__, **extra}
        append_log(self.run_dir / "validation.jsonl", [row])
        append_log(self.run_dir / "validation_samples.jsonl",
                   [{"label": label, "step": step, **x} for x in samples[:20]])
        console.print(f"[bold]validation[/] {label} (step {step}): "
                      f"{result.pass_at_1_text()}, reward {result.mean_reward:.3f}, format "
                      f"{result.format_rate:.1%}, length {result.mean_length:.1f}, "
                      f"{result.seconds:.0f} s")
        if result.by_category:
            console.print("  by category: " + ", ".join(
                f"{k} {v['pass_at_1']:.1%} (n {v['n']})" for k, v in result.by_category.items()),
                highlight=False)
        return row

    def pass_at_k(self, label: str) -> dict | None:
        """Sampled pass@k / maj@k (k = 1, 4, 8, 16 up to n) of the current policy on the
        validation set at ``eval.temperature`` with n = ``eval.pass_at_k_samples`` (R29);
        one engine call per ``eval.batch_size`` prompts. None when n is 0."""
        s, c = self.state, self.config
        if not c.eval.pass_at_k_samples:
            return None
        with self._output_in_engine(), Phase(
                f"pass@k {label} (n={c.eval.pass_at_k_samples})", len(s.data.val_tasks),
                console, unit="problems") as phase:
            row = sampled_pass_at_k(
                s.models.engine, s.models.tokenizer, s.data.val_tasks, s.data.val_prompts,
                self.eval_rewards, n=c.eval.pass_at_k_samples, ks=(1, 4, 8, 16),
                temperature=c.eval.temperature, max_new_tokens=c.eval.max_new_tokens,
                stop_token_ids=s.stop_ids, batch_size=c.eval.batch_size, seed=c.seed,
                progress=phase.update, runner=self.episodes())
        errors, samples = row["verifier_errors"], row["samples"]
        if not row["measured"]:
            curve = (f"NOT MEASURED: {errors} of {samples} samples are verifier errors or "
                     f"timeouts (counting them wrong: " + ", ".join(
                         f"pass@{k} {v:.1%}" for k, v in row["pass@k"].items()) + ")")
        else:
            curve = ", ".join(f"pass@{k} {v:.1%}" for k, v in row["pass@k"].items()) + (
                f" ({errors} of {samples} samples verifier errors or timeouts, counted wrong)"
                if errors else "")
        console.print(f"[bold]pass@k[/] {label} (n={row['n']}, T={row['temperature']}): "
                      f"{curve}; {row['seconds']:.0f} s")
        return row
