"""One GRPO step: collect scored rollouts -> shape rewards -> advantages -> (mask truncated)
-> train batch -> policy update -> metrics (:meth:`GRPOStep.run`, one screen).

DeepSeekMath (Shao et al. 2024, arXiv:2402.03300) eq. 3: for each prompt sample G completions
from pi_old, score them, A_i = (R_i - mean) / (std + eps), and maximise the clipped surrogate
minus beta * KL(pi_theta || pi_ref). The algorithm pieces are the pure functions of
:mod:`rlvr.algo`; the rollouts come from the run's rollout source
(:mod:`rlvr.train.rollouts`; DAPO's extra rounds: :mod:`rlvr.train.dynamic_sampling`); this
module only moves tensors between them and the model. The step holds no training object: it
reads the policy, reference, optimizer, scheduler and KL controller from the
:class:`~rlvr.train.state.TrainingState` on every call.

With a run config's ``env:`` section the rollouts are multi-turn episodes: one row per
episode, rewards = the episodes' verdicts, and every token statistic (loss, KL, entropy,
lengths, length shaping) counts the rollout's ``loss_mask``, the sampled tokens; for
single-turn completions that mask is the completion mask, so the single-turn step is
unchanged.
"""

from __future__ import annotations

import time
from functools import partial

import torch
from torch import Tensor

from rlvr.algo.kl import kl_divergence, kl_penalized_rewards
from rlvr.algo.length import concise_correct_bonus, length_penalty, overlong_penalty
from rlvr.algo.loss_agg import BatchCounts
from rlvr.algo.registry import ADVANTAGE_ESTIMATORS
from rlvr.algo.step_advantages import StepAdvantages, step_advantages
from rlvr.algo.utils import masked_mean
from rlvr.models.forward import SequenceBatch, build_sequences, completion_log_probs
from rlvr.progress import announce
from rlvr.rewards.types import RewardResult, Status
from rlvr.rollout import RolloutOutput
from rlvr.train.batch import StepRollouts, TrainBatch
from rlvr.train.config import RunConfig
from rlvr.train.dynamic_sampling import Judged, collect_groups
from rlvr.train.rollouts import ScoredRollouts, length_cap, sampled_lengths, truncated
from rlvr.train.state import TrainingState
from rlvr.update import LocalBackend, policy_update
from rlvr.update.corrections import needs_sampler_log_probs
from rlvr.update.fused_layers import fused_layer_ops
from rlvr.update.micro_batches import micro_batch_slices


def _sampled_entropy(out: RolloutOutput) -> float:
    """Per-token entropy of the policy as the rollout sampled it, in nats/token: the mean
    negative log-prob of the sampled tokens over every sampled token of the step (the
    ``loss_mask``: an episode's inserted observation tokens were not sampled; a Monte-Carlo
    estimate of the entropy of ``softmax(logits / temperature)``). Measured on every row, so
    it exists when no row trains (no KL, no update entropy); 0.0 when the step sampled no
    token."""
    mask = out.loss_mask
    if not bool(mask.any()):
        return 0.0
    return float(-out.logprobs.float()[mask].mean())


def mask_truncated(out: RolloutOutput, rows: Tensor) -> tuple[Tensor, float]:
    """``algo.mask_truncated``: the train rows less the cut ones
    (:func:`rlvr.train.rollouts.truncated`), and how many were cut."""
    cut = torch.tensor(truncated(out))
    return rows[~cut[rows]], float(cut[rows].sum())


def train_batch(scored: ScoredRollouts, advantages: Tensor, rows: Tensor, pad_token_id: int
                ) -> TrainBatch | None:
    """The rows that carry gradient as the update reads them (``None`` when no row does)."""
    if not len(rows):
        return None
    out = scored.output
    seqs = build_sequences([scored.prompts[i] for i in rows.tolist()],
                           out.completion_ids[rows], out.completion_mask[rows],
                           pad_token_id, out.loss_mask[rows])
    return TrainBatch(rows, seqs, advantages[rows], out.logprobs[rows])


class GRPOStep:
    """Runs GRPO steps over a run's :class:`~rlvr.train.state.TrainingState`.

    Args:
        config: the run config (``grpo``, ``algo``, ``model.precision`` are used; the precision
            is resolved once, here).

    Attributes:
        noise: the random generator of ``algo.reward_noise`` (seeded ``seed + 17``).
    """

    def __init__(self, config: RunConfig):
        self.config = config
        self.bf16 = config.model.bf16  # model.precision resolved on this machine
        self.noise = torch.Generator().manual_seed(config.seed + 17)

    # -- the step ---------------------------------------------------------------------------
    def run(self, state: TrainingState, step: int) -> StepRollouts:
        """GRPO step ``step``; ``batch.metrics`` holds its metrics (R10, R35, R36). The
        running :class:`rlvr.progress.Phase` is told each part as it starts (rollout, reward,
        update). ``batch.tasks`` / ``task_indices`` hold every task drawn (DAPO's extra
        rounds too, :func:`rlvr.train.dynamic_sampling.collect_groups`)."""
        c, g = self.config, self.config.grpo
        scored, judged = collect_groups(state.source, state, step, g.prompts_per_step,
                                        g.dynamic_sampling_rounds, partial(self.judge, state))
        t0 = time.perf_counter()
        adv, rows, metrics = judged.advantages.advantages, judged.advantages.rows, judged.metrics
        if c.algo.mask_truncated:
            rows, metrics["masked_truncated"] = mask_truncated(scored.output, rows)
        train = train_batch(scored, adv, rows, state.models.tokenizer.pad_token_id)
        if not bool(torch.isfinite(adv).all()):  # a reward function returned NaN / inf
            update = {"nonfinite_advantages": float((~torch.isfinite(adv)).sum()),
                      "update_skipped_nonfinite": 1.0}
        elif train is None:
            update = {"skipped_update": 1.0}
        else:
            announce("update")
            update = self.update(state, train)
        update = {**metrics, **update, "kl_coef": state.optim.kl.value}
        source_metrics = getattr(state.source, "step_metrics", None)
        if source_metrics is not None:  # asynchronous rollouts: staleness, drops, idle time
            update.update(source_metrics())
        if "kl" in update:
            state.optim.kl.update(update["kl"])
        batch = StepRollouts(scored.tasks, judged.advantages.zero_variance, scored.output,
                             scored.texts, scored.results, judged.rewards, adv, train,
                             episodes=scored.episodes, task_indices=scored.task_indices)
        batch.metrics = self._metrics(state, batch, update, (
            scored.seconds_rollout, scored.seconds_reward, time.perf_counter() - t0))
        return batch

    # -- the phases -------------------------------------------------------------------------
    def judge(self, state: TrainingState, scored: ScoredRollouts) -> Judged:
        """The verifiers' rewards, shaped (:meth:`shape_rewards`), and their advantages
        (:func:`rlvr.algo.step_advantages.step_advantages`: rows with a verifier error are
        left out; ``algo.advantage``, ``reward_noise``, ``negative_advantage_scale``)."""
        results = scored.results
        rewards = torch.tensor([r.reward for r in results], dtype=torch.float32)
        valid = torch.tensor([r.status is not Status.error for r in results])
        shaped, metrics = self.shape_rewards(state, rewards, scored.output, results,
                                             scored.prompts)
        return Judged(rewards, self.advantages(shaped, scored.output.prompt_index, valid),
                      metrics)

    def advantages(self, rewards: Tensor, group_ids: Tensor, valid: Tensor) -> StepAdvantages:
        """:func:`rlvr.algo.step_advantages.step_advantages` with the run's ``algo``
        settings (``advantage`` and its options, ``negative_advantage_scale``,
        ``reward_noise`` drawn from :attr:`noise`)."""
        a = self.config.algo
        return step_advantages(rewards, group_ids, valid, estimator=a.advantage,
                               options=ADVANTAGE_ESTIMATORS.options(a.advantage, self.config),
                               negative_scale=a.negative_advantage_scale,
                               noise_std=a.reward_noise, generator=self.noise)

    def shape_rewards(self, state: TrainingState, rewards: Tensor, out: RolloutOutput,
                      results: list[RewardResult], prompts: list[list[int]]
                      ) -> tuple[Tensor, dict[str, float]]:
        """The reward the advantage sees: the verifier's reward plus the configured length
        shaping (R19: DAPO overlong punishment, linear length penalty, Kimi k1.5 concise
        bonus) and, with ``algo.kl_in: reward``, minus beta * sum_t KL_t (Ziegler et al.
        2019). Lengths and KL count sampled tokens only (``out.loss_mask``); lengths are
        measured against the source's cap (:func:`rlvr.train.rollouts.length_cap`).
        ``prompts``: the N rows' prompt ids. Returns FloatTensor[N] and metrics
        (``reward_shaped_mean``, ``kl``)."""
        a, kl_value = self.config.algo, state.optim.kl.value
        lengths, shaped, metrics = sampled_lengths(out), rewards.clone(), {}
        cap = length_cap(state.source, self.config.grpo.max_new_tokens)
        if a.overlong_buffer:
            shaped += a.overlong_penalty * overlong_penalty(
                lengths, cap, min(a.overlong_buffer, cap))
        if a.length_penalty:
            shaped += length_penalty(lengths, cap, a.length_penalty)
        if a.concise_bonus:
            correct = torch.tensor([r.status is Status.correct for r in results])
            shaped += concise_correct_bonus(lengths, correct, out.prompt_index, a.concise_bonus)
        if a.kl_in == "reward" and kl_value > 0:
            seqs = build_sequences(prompts, out.completion_ids, out.completion_mask,
                                   state.models.tokenizer.pad_token_id, out.loss_mask)
            ref = self._log_probs(state.models.reference, seqs)
            kl = kl_divergence(a.kl_estimator, out.logprobs.float(), ref)
            kl = kl.where(out.loss_mask, torch.zeros_like(kl))
            shaped = kl_penalized_rewards(shaped, kl, out.loss_mask, kl_value)
            metrics["kl"] = float(masked_mean(kl, out.loss_mask))
        if not torch.equal(shaped, rewards):
            metrics["reward_shaped_mean"] = float(shaped.mean())
        return shaped, metrics

    def update(self, state: TrainingState, train: TrainBatch) -> dict[str, float]:
        """``grpo.mu`` optimizer steps on the step's train rows, then one scheduler step;
        returns update metrics. Sets ``train.old_log_probs`` (``grpo.mu > 1``) and
        ``train.ref_log_probs`` (a KL term in the loss) first. Runs data-parallel over
        ``state.optim.update_group`` when there is one.

        A non-finite log-prob, loss or gradient norm anywhere in an epoch skips that epoch's
        optimizer step (the policy and the optimizer moments stay as they were, R38) and is
        counted in ``nonfinite_log_probs`` (rows), ``nonfinite_loss``, ``nonfinite_grad_norm``
        and ``update_skipped_nonfinite``."""
        g, a, seqs = self.config.grpo, self.config.algo, train.sequences
        m, o = state.models, state.optim
        if g.mu > 1:
            train.old_log_probs = self._log_probs(m.policy, seqs)
        kl_coef = o.kl.value if a.kl_in == "loss" else 0.0
        if kl_coef > 0:
            train.ref_log_probs = self._log_probs(m.reference, seqs)
        if o.update_group is not None:  # data parallel (grpo.update_processes > 1)
            # the sampler's log-probs only when a correction weights by them
            sampler = train.sampler_log_probs if needs_sampler_log_probs(self.config) else None
            out_metrics = o.update_group.update(seqs, train.advantages, train.old_log_probs,
                                                train.ref_log_probs, kl_coef, sampler)
        else:
            backend = LocalBackend(m.policy)
            counts = BatchCounts(*backend.global_counts(len(train.train_rows),
                                                        int(seqs.loss_mask.sum())))
            out_metrics = policy_update(backend, o.optimizer, seqs, train.advantages,
                                        train.old_log_probs, self.config, counts,
                                        ref_log_probs=train.ref_log_probs, kl_coef=kl_coef,
                                        epochs=g.mu, sampler_log_probs=train.sampler_log_probs,
                                        bf16=self.bf16)
        o.scheduler.step()
        return out_metrics

    # -- helpers ----------------------------------------------------------------------------
    @torch.no_grad()
    def _log_probs(self, model, seqs: SequenceBatch) -> Tensor:
        width = seqs.completion_mask.shape[1]
        g = self.config.grpo
        slices = micro_batch_slices(seqs.completion_mask.sum(1).tolist(), g.micro_batch_size,
                                    g.micro_batch_tokens)
        with fused_layer_ops(model):  # the update's arithmetic (rlvr.update.fused_layers)
            parts = [completion_log_probs(model, seqs.rows(rows).trimmed(),
                                          temperature=g.temperature, bf16=self.bf16,
                                          shared_prefix=g.shared_prefix != "off")
                     for rows in slices]
        return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1])) for p in parts])

    def _metrics(self, state: TrainingState, batch: StepRollouts, update: dict, phases) -> dict:
        out, results, n = batch.rollout, batch.results, len(batch.results)
        lengths = sampled_lengths(out).float()
        statuses = [r.status for r in results]
        metrics = {
            "reward_mean": float(batch.rewards.mean()),
            "reward_std": float(batch.rewards.std()) if n > 1 else 0.0,
            "accuracy": sum(s is Status.correct for s in statuses) / n,
            "format_error_rate": sum(r.components.get("format", 0) <= 0 for r in results) / n,
            "parse_failure_rate": sum(s is Status.unparsed for s in statuses) / n,
            "multiple_answer_rate": sum(s is Status.multiple_answers for s in statuses) / n,
            "verifier_errors": sum(s in (Status.error, Status.timeout) for s in statuses),
            "zero_variance_fraction": float(batch.zero_variance.sum()) / max(len(batch.tasks), 1),
            "length_mean": float(lengths.mean()),
            "length_max": float(lengths.max()),
            "truncation_rate": sum(truncated(out)) / n,
            "rollout_entropy": _sampled_entropy(out),
            "train_rows": batch.num_trained,
            "lr": state.optim.optimizer.param_groups[0]["lr"],
            "seconds_rollout": phases[0],
            "seconds_reward": phases[1],
            "seconds_update": phases[2],
            "tokens_per_second": float(lengths.sum()) / max(phases[0], 1e-9),
        }
        metrics.update(update)
        if batch.episodes is not None:
            metrics.update(batch.episodes.metrics())
        return metrics
