"""One GRPO step, as data (R16): rollout -> reward -> advantage -> policy update.

DeepSeekMath (Shao et al. 2024, arXiv:2402.03300) eq. 3: for each prompt sample G completions
from pi_old, score them, A_i = (R_i - mean) / (std + eps), and maximise the clipped surrogate
minus beta * KL(pi_theta || pi_ref). The algorithm pieces are the pure functions of
:mod:`rlvr.algo`; this module only moves tensors between them and the model.

With a run config's ``env:`` section the rollout is multi-turn episodes
(:mod:`rlvr.train.episode_step`): one row per episode, rewards = the episodes' verdicts, and
every token statistic (loss, KL, entropy, lengths, length shaping) counts the rollout's
``loss_mask``, the sampled tokens; for single-turn completions that mask is the completion
mask, so the single-turn step is unchanged.
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from rlvr.algo.advantages import (add_reward_noise, compute_advantages, scale_negative_advantages,
                                  zero_variance_groups)
from rlvr.algo.kl import (AdaptiveKLController, FixedKLController, kl_divergence,
                          kl_penalized_rewards)
from rlvr.algo.length import concise_correct_bonus, length_penalty, overlong_penalty
from rlvr.algo.loss_agg import BatchCounts
from rlvr.algo.registry import ADVANTAGE_ESTIMATORS
from rlvr.algo.utils import masked_mean
from rlvr.envs.runner import EpisodeBatch, EpisodeRunner
from rlvr.models.forward import SequenceBatch, build_sequences, completion_log_probs
from rlvr.records import Task
from rlvr.rewards.pipeline import RewardPipeline, ScoreRequest
from rlvr.rewards.types import RewardResult, Status
from rlvr.rollout import RolloutOutput, SamplingParams
from rlvr.rollout.types import concat_rollouts
from rlvr.train.batch import StepRollouts, TrainBatch
from rlvr.train.config import RunConfig
from rlvr.train.episode_step import row_prompts, sampled_lengths, truncated
from rlvr.train.policy import sync_engine
from rlvr.update import LocalBackend, policy_update
from rlvr.update.micro_batches import micro_batch_slices


def _first_groups(adv: Tensor, rows: Tensor, prompt_index: Tensor, k: int
                  ) -> tuple[Tensor, Tensor, int]:
    """Keep the train rows of the first ``k`` groups that have any (groups in draw order);
    the others' advantages become 0. Returns ``(advantages, rows, groups dropped)``."""
    groups = torch.unique(prompt_index[rows])  # sorted: draw order
    keep = torch.isin(prompt_index[rows], groups[:k])
    dropped_rows = rows[~keep]
    adv = adv.clone()
    adv[dropped_rows] = 0.0
    return adv, rows[keep], max(len(groups) - k, 0)


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


class GRPOStep:
    """Runs GRPO steps for a policy, its reference and a rollout engine.

    Args:
        config: the run config (``grpo``, ``algo``, ``model.precision`` are used; the precision
            is resolved once, here).
        policy: the trainable model (fp32 master weights).
        reference: frozen reference model, or ``None`` when ``algo.kl_coef == 0``.
        engine: rollout engine sharing ``policy``'s weights.
        tokenizer: decodes completions.
        rewards: the reward pipeline.
        optimizer, scheduler: torch optimizer and LR scheduler of ``policy``.
        stop_token_ids: token ids that end a completion.

    Attributes:
        update_group: a :class:`rlvr.distributed.update_group.UpdateGroup` that runs the
            policy update data-parallel (set by the run when ``grpo.update_processes > 1``),
            else None.
        on_phase: ``fn(part)`` told each part of a step as it starts (``rollout``,
            ``reward``, ``update``; the run's progress display), or None.
        episodes: an :class:`rlvr.envs.runner.EpisodeRunner` (set by the run when the
            config has an ``env`` section): the rollout is its episodes; None: single-turn
            completions.
    """

    def __init__(self, config: RunConfig, policy, reference, engine, tokenizer,
                 rewards: RewardPipeline, optimizer, scheduler, stop_token_ids):
        self.config, self.policy, self.reference = config, policy, reference
        self.engine, self.tokenizer, self.rewards = engine, tokenizer, rewards
        self.optimizer, self.scheduler = optimizer, scheduler
        self.stop_token_ids = stop_token_ids
        self.update_group = None
        self.on_phase = None
        self.episodes: EpisodeRunner | None = None
        self.refill = None
        self.bf16 = config.model.bf16  # model.precision resolved on this machine
        self.noise = torch.Generator().manual_seed(config.seed + 17)
        a = config.algo
        self.kl_ctl = (AdaptiveKLController(a.kl_coef, a.kl_target)
                       if a.kl_controller == "adaptive" else FixedKLController(a.kl_coef))

    # -- phases -----------------------------------------------------------------------------
    def sampling_params(self, step: int, round_: int = 0) -> SamplingParams:
        """The step's sampling: ``grpo`` temperature, top-p, ``max_new_tokens`` (per turn in an
        episode), G = ``group_size`` per task, seed ``seed * 1_000_003 + step`` (plus
        ``round_ * 2**40`` for a dynamic-sampling round after the first)."""
        g = self.config.grpo
        return SamplingParams(temperature=g.temperature, top_p=g.top_p,
                              max_new_tokens=g.max_new_tokens, n=g.group_size,
                              stop_token_ids=self.stop_token_ids,
                              seed=self.config.seed * 1_000_003 + step + round_ * 2**40)

    def rollout(self, tasks: list[Task], prompts: list[list[int]], step: int,
                round_: int = 0) -> RolloutOutput:
        sync_engine(self.engine, self.policy)
        return self.engine.generate(prompts, self.sampling_params(step, round_))

    def play(self, tasks: list[Task], step: int, round_: int = 0) -> EpisodeBatch:
        """The step's episodes (``episodes`` must be set): G per task, scored as they end."""
        sync_engine(self.engine, self.policy)
        return self.episodes.play(self.engine, tasks, self.sampling_params(step, round_))

    def score(self, tasks: list[Task], out: RolloutOutput) -> tuple[list[str], list[RewardResult]]:
        texts = [self.tokenizer.decode(out.completion(r), skip_special_tokens=True)
                 for r in range(out.num_rows)]
        index = out.prompt_index.tolist()
        requests = [ScoreRequest(t, tasks[i].reference, tasks[i].task_type)
                    for t, i in zip(texts, index)]
        return texts, self.rewards.score_batch(requests)

    def length_cap(self) -> int:
        """The length (sampled tokens) length shaping measures against: ``grpo.max_new_tokens``,
        or for episodes :meth:`rlvr.envs.runner.EpisodeRunner.length_cap`."""
        cap = self.config.grpo.max_new_tokens
        return cap if self.episodes is None else self.episodes.length_cap(cap)

    def shape_rewards(self, rewards: Tensor, out: RolloutOutput, results: list[RewardResult],
                      prompts: list[list[int]]) -> tuple[Tensor, dict[str, float]]:
        """The reward the advantage sees: the verifier's reward plus the configured length
        shaping (R19: DAPO overlong punishment, linear length penalty, Kimi k1.5 concise
        bonus) and, with ``algo.kl_in: reward``, minus beta * sum_t KL_t (Ziegler et al.
        2019). Lengths and KL count sampled tokens only (``out.loss_mask``). ``prompts``: the
        N rows' prompt ids. Returns FloatTensor[N] and metrics (``reward_shaped_mean``,
        ``kl``)."""
        a = self.config.algo
        lengths, shaped, metrics = sampled_lengths(out), rewards.clone(), {}
        cap = self.length_cap()
        if a.overlong_buffer:
            shaped += a.overlong_penalty * overlong_penalty(
                lengths, cap, min(a.overlong_buffer, cap))
        if a.length_penalty:
            shaped += length_penalty(lengths, cap, a.length_penalty)
        if a.concise_bonus:
            correct = torch.tensor([r.status is Status.correct for r in results])
            shaped += concise_correct_bonus(lengths, correct, out.prompt_index, a.concise_bonus)
        if a.kl_in == "reward" and self.kl_ctl.value > 0:
            seqs = build_sequences(prompts, out.completion_ids, out.completion_mask,
                                   self.tokenizer.pad_token_id, out.loss_mask)
            ref = self._log_probs(self.reference, seqs)
            kl = kl_divergence(a.kl_estimator, out.logprobs.float(), ref)
            kl = kl.where(out.loss_mask, torch.zeros_like(kl))
            shaped = kl_penalized_rewards(shaped, kl, out.loss_mask, self.kl_ctl.value)
            metrics["kl"] = float(masked_mean(kl, out.loss_mask))
        if not torch.equal(shaped, rewards):
            metrics["reward_shaped_mean"] = float(shaped.mean())
        return shaped, metrics

    def advantages(self, rewards: Tensor, group_ids: Tensor, valid: Tensor
                   ) -> tuple[Tensor, Tensor, Tensor]:
        """Advantages, the rows to train on, and which groups had zero reward variance.

        Rows whose verifier failed (``valid`` false: status ``error``, e.g. a ``sandbox_error``
        of a code task; infrastructure, not the policy's fault) are left out of every
        statistic rather than scored 0 (R14 logic): the estimator sees only the valid rows, so
        their group's mean and std, and with ``algo.std_scale: batch`` or
        ``reinforce_pp_baseline`` the batch's std, are those of the valid rows; an excluded
        row gets advantage 0 and is not a train row. A group of only excluded rows trains
        nothing (and is not counted as zero-variance: it has no valid reward).

        Args:
            rewards: FloatTensor[N], the (shaped) reward per completion.
            group_ids: LongTensor[N], the prompt index of each completion (0 .. B - 1).
            valid: BoolTensor[N], false for rows to leave out.

        Returns:
            ``(advantages FloatTensor[N] fp32, train_rows LongTensor[n], zero_variance
            BoolTensor[B])``: advantages are 0 for excluded rows and zero-variance groups;
            train rows are the valid rows of groups with non-zero variance. The negative
            advantages are weighted by ``algo.negative_advantage_scale``
            (:func:`rlvr.algo.advantages.scale_negative_advantages`).
        """
        a = self.config.algo
        r = rewards.clone()
        if a.reward_noise > 0:  # drawn for all N rows, so the generator's stream is fixed
            r = add_reward_noise(r, a.reward_noise, self.noise)
        adv = torch.zeros(len(r), dtype=torch.float32)
        zero_rows = torch.zeros(len(r), dtype=torch.bool)  # valid rows of zero-variance groups
        if bool(valid.any()):
            ids = group_ids[valid]
            zero_rows[valid] = zero_variance_groups(rewards[valid], ids).mask  # before noise
            options = ADVANTAGE_ESTIMATORS.options(a.advantage, self.config)
            adv[valid] = compute_advantages(a.advantage, r[valid], ids, **options)
            adv = scale_negative_advantages(adv, a.negative_advantage_scale)  # 1: unchanged
        trained = valid & ~zero_rows
        adv = torch.where(trained, adv, torch.zeros_like(adv))
        zero_groups = torch.zeros(int(group_ids.max()) + 1, dtype=torch.bool)
        zero_groups[group_ids[zero_rows]] = True
        rows = torch.nonzero(trained).flatten()
        return adv, rows, zero_groups

    def update(self, train: TrainBatch) -> dict[str, float]:
        """``grpo.mu`` optimizer steps on the step's train rows; returns update metrics.
        Sets ``train.old_log_probs`` (``grpo.mu > 1``) and ``train.ref_log_probs`` (a KL
        term in the loss) first.

        A non-finite log-prob, loss or gradient norm anywhere in an epoch skips that epoch's
        optimizer step (the policy and the optimizer moments stay as they were, R38) and is
        counted in ``nonfinite_log_probs`` (rows), ``nonfinite_loss``, ``nonfinite_grad_norm``
        and ``update_skipped_nonfinite``."""
        g, a, seqs = self.config.grpo, self.config.algo, train.sequences
        if g.mu > 1:
            train.old_log_probs = self._log_probs(self.policy, seqs)
        kl_coef = self.kl_ctl.value if a.kl_in == "loss" else 0.0
        if kl_coef > 0:
            train.ref_log_probs = self._log_probs(self.reference, seqs)
        if self.update_group is not None:  # data parallel (grpo.update_processes > 1)
            sampler = train.sampler_log_probs if a.tis_cap else None  # 0 / None: TIS off
            out_metrics = self.update_group.update(seqs, train.advantages, train.old_log_probs,
                                                   train.ref_log_probs, kl_coef, sampler)
        else:
            out_metrics = self._update_here(train, kl_coef)
        self.scheduler.step()
        return out_metrics

    def _update_here(self, train: TrainBatch, kl_coef: float) -> dict[str, float]:
        """:meth:`update`'s ``mu`` epochs in this process (:func:`rlvr.update.policy_update`
        with the plain backend)."""
        seqs = train.sequences
        backend = LocalBackend(self.policy)
        counts = BatchCounts(*backend.global_counts(len(train.train_rows),
                                                    int(seqs.loss_mask.sum())))
        return policy_update(backend, self.optimizer, seqs, train.advantages,
                             train.old_log_probs, self.config, counts,
                             ref_log_probs=train.ref_log_probs, kl_coef=kl_coef,
                             epochs=self.config.grpo.mu,
                             sampler_log_probs=train.sampler_log_probs, bf16=self.bf16)

    # -- the step ---------------------------------------------------------------------------
    def run(self, tasks: list[Task], prompts: list[list[int]], step: int) -> StepRollouts:
        """One whole step; ``batch.metrics`` holds the step's metrics (R10, R35, R36).
        ``on_phase`` (when set) is told each part as it starts: rollout, reward, update.

        With ``grpo.dynamic_sampling_rounds`` and ``refill`` set (DAPO's dynamic sampling, Yu
        et al. 2025, Sec. 3.2): while fewer than ``prompts_per_step`` groups have reward
        variance, ``refill(prompts_per_step)`` draws another round of tasks, which is rolled
        out and scored too (at most that many extra rounds); the update then trains the
        first ``prompts_per_step`` groups with variance, in draw order. ``batch.tasks`` holds
        every drawn task (``refill``'s after the caller's)."""
        g = self.config.grpo
        rounds, seconds = [], [0.0, 0.0]
        extra = g.dynamic_sampling_rounds if self.refill is not None else 0
        for round_ in range(extra + 1):
            if round_:
                tasks, prompts = self.refill(g.prompts_per_step)
            rounds.append(self._sample_round(tasks, prompts, step, round_, seconds))
            out, texts, results, per_row, played, all_tasks = self._merge(rounds)
            t2 = time.perf_counter()
            rewards = torch.tensor([r.reward for r in results], dtype=torch.float32)
            valid = torch.tensor([r.status is not Status.error for r in results])
            shaped, shaping = self.shape_rewards(rewards, out, results, per_row)
            adv, rows, zero_groups = self.advantages(shaped, out.prompt_index, valid)
            if len(torch.unique(out.prompt_index[rows])) >= g.prompts_per_step:
                break
        tasks = all_tasks
        if len(rounds) > 1:
            adv, rows, dropped = _first_groups(adv, rows, out.prompt_index, g.prompts_per_step)
            shaping.update(sampling_rounds=float(len(rounds)), dropped_groups=float(dropped))
        if self.config.algo.mask_truncated:
            cut = torch.tensor(truncated(out))
            shaping["masked_truncated"] = float(cut[rows].sum())
            rows = rows[~cut[rows]]
        train = None
        if len(rows):
            seqs = build_sequences([per_row[i] for i in rows.tolist()],
                                   out.completion_ids[rows], out.completion_mask[rows],
                                   self.tokenizer.pad_token_id, out.loss_mask[rows])
            train = TrainBatch(rows, seqs, adv[rows], out.logprobs[rows])
        batch = StepRollouts(tasks, zero_groups, out, texts, results, rewards, adv, train,
                             episodes=played)
        if not bool(torch.isfinite(adv).all()):  # a reward function returned NaN / inf
            update = {"nonfinite_advantages": float((~torch.isfinite(adv)).sum()),
                      "update_skipped_nonfinite": 1.0}
        elif train is None:
            update = {"skipped_update": 1.0}
        else:
            self._phase("update")
            update = self.update(train)
        t3 = time.perf_counter()
        update = {**shaping, **update, "kl_coef": self.kl_ctl.value}
        if "kl" in update:
            self.kl_ctl.update(update["kl"])
        batch.metrics = self._metrics(batch, update, (seconds[0], seconds[1], t3 - t2))
        if played is not None:
            batch.metrics.update(played.metrics())
        return batch

    # -- helpers ----------------------------------------------------------------------------
    def _sample_round(self, tasks, prompts, step: int, round_: int, seconds: list[float]):
        """Roll out and score one round of tasks; adds its rollout and reward seconds to
        ``seconds``. Returns ``(tasks, output, texts, results, row prompts, episodes)``."""
        self._phase("rollout")
        t0 = time.perf_counter()
        played = None
        if self.episodes is None:
            out = self.rollout(tasks, prompts, step, round_)
            t1 = time.perf_counter()
            self._phase("reward")
            texts, results = self.score(tasks, out)
            per_row = row_prompts(prompts, out)
        else:  # the environment scored each episode as it ended
            played = self.play(tasks, step, round_)
            t1 = time.perf_counter()
            out, texts, results = played.output, played.texts, played.results
            per_row = played.rollout.prompts
        seconds[0] += t1 - t0
        seconds[1] += time.perf_counter() - t1
        return tasks, out, texts, results, per_row, played

    @staticmethod
    def _merge(rounds):
        """The rounds so far as one batch: ``(output, texts, results, row prompts, episodes,
        tasks)``."""
        if len(rounds) == 1:
            tasks, out, texts, results, per_row, played = rounds[0]
            return out, texts, results, per_row, played, tasks
        counts = [len(r[0]) for r in rounds]
        played = (None if rounds[0][5] is None
                  else EpisodeBatch.concat([r[5] for r in rounds], counts))
        return (concat_rollouts([r[1] for r in rounds], counts),
                [t for r in rounds for t in r[2]], [x for r in rounds for x in r[3]],
                [p for r in rounds for p in r[4]], played, [t for r in rounds for t in r[0]])

    def _phase(self, part: str) -> None:
        if self.on_phase is not None:
            self.on_phase(part)

    @torch.no_grad()
    def _log_probs(self, model, seqs: SequenceBatch) -> Tensor:
        width = seqs.completion_mask.shape[1]
        g = self.config.grpo
        slices = micro_batch_slices(seqs.completion_mask.sum(1).tolist(), g.micro_batch_size,
                                    g.micro_batch_tokens)
        parts = [completion_log_probs(model, seqs.rows(rows).trimmed(),
                                      temperature=g.temperature, bf16=self.bf16,
                                      shared_prefix=g.shared_prefix != "off")
                 for rows in slices]
        return torch.cat([torch.nn.functional.pad(p, (0, width - p.shape[1])) for p in parts])

    def _metrics(self, batch: StepRollouts, update: dict, phases) -> dict:
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
            "lr": self.optimizer.param_groups[0]["lr"],
            "seconds_rollout": phases[0],
            "seconds_reward": phases[1],
            "seconds_update": phases[2],
            "tokens_per_second": float(lengths.sum()) / max(phases[0], 1e-9),
        }
        metrics.update(update)
        return metrics
