"""The algorithm core of rlvr: pure functions, tensors in and tensors out.

No I/O, no model, no config objects. Each variant is a small function in a name -> entry
registry (:mod:`rlvr.algo.registry`), so a config selects it by string; the entry also says
which run-config options the function takes and (loss aggregations) how a micro-batch's loss
is weighted in the step (:func:`micro_batch_weight`), so a trainer never checks names:

- :data:`ADVANTAGE_ESTIMATORS` (:mod:`.advantages`): ``grpo``, ``dr_grpo``, ``rloo``,
  ``reinforce_pp_baseline``.
- :data:`POLICY_LOSSES` (:mod:`.policy_loss`, :mod:`.gspo`): ``clip``, ``clip_higher``,
  ``dual_clip``, ``cispo``, ``gspo``.
- :data:`KL_ESTIMATORS` (:mod:`.kl`): ``k1``, ``k2``, ``k3``.
- :data:`LOSS_AGGREGATIONS` (:mod:`.loss_agg`): ``grpo``, ``bnpo``, ``dapo``, ``dr_grpo``.

- :data:`OFF_POLICY_CORRECTIONS` (:mod:`.corrections`): ``none``, ``tis``, ``mis``,
  ``icepop``, ``decoupled``: the per-token weight of the policy term of
  :func:`policy_objective` for completions the current policy did not sample (a stale
  version, another engine or precision; ``algo.off_policy_correction``).

Shape conventions, everywhere: N completions in a flat batch (B prompts x G samples,
prompt-major), T completion-token positions, V vocabulary entries.
``rewards: FloatTensor[N]``, ``group_ids: LongTensor[N]``, ``advantages: FloatTensor[N]``,
per-token ``log_probs: FloatTensor[N, T]``, ``mask: BoolTensor[N, T]``,
``logits: FloatTensor[N, T, V]``. Everything is computed in fp32 (inputs are cast).
"""

from rlvr.algo.advantages import (
    GroupStats,
    ZeroVarianceGroups,
    add_reward_noise,
    compute_advantages,
    dr_grpo_advantages,
    group_stats,
    grpo_advantages,
    make_group_ids,
    reinforce_pp_baseline_advantages,
    rloo_advantages,
    scale_negative_advantages,
    zero_variance_groups,
)
from rlvr.algo.corrections import (
    OFF_POLICY_CORRECTIONS,
    CorrectionWeights,
    behaviour_ratio,
    compute_correction,
)
from rlvr.algo.entropy import token_entropy
from rlvr.algo.gspo import gspo_loss
from rlvr.algo.importance import ImportanceWeights, truncated_importance_weights
from rlvr.algo.kl import (
    AdaptiveKLController,
    FixedKLController,
    kl_divergence,
    kl_k1,
    kl_k2,
    kl_k3,
    kl_penalized_rewards,
)
from rlvr.algo.length import (
    concise_correct_bonus,
    inference_length_limit,
    length_penalty,
    mask_truncated,
    overlong_penalty,
)
from rlvr.algo.logprobs import (
    completion_mask,
    lengths_to_mask,
    mask_after_eos,
    next_token_log_probs,
    token_log_probs,
    token_log_probs_and_entropy,
)
from rlvr.algo.loss_agg import (
    BatchCounts,
    aggregate_loss,
    constant_normalizer_sum,
    global_token_mean,
    micro_batch_weight,
    seq_mean_token_mean,
    token_mean,
)
from rlvr.algo.objective import ObjectiveOutput, policy_objective
from rlvr.algo.policy_loss import (
    PolicyLossOutput,
    clip_higher_loss,
    clip_loss,
    clipped_surrogate_loss,
    compute_policy_loss,
    dual_clip_loss,
)
from rlvr.algo.registry import (
    ADVANTAGE_ESTIMATORS,
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    POLICY_LOSSES,
    Entry,
    Registry,
)
from rlvr.algo.utils import masked_mean, masked_sum

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AdaptiveKLController",
    "BatchCounts",
    "CorrectionWeights",
    "Entry",
    "FixedKLController",
    "GroupStats",
    "ImportanceWeights",
    "KL_ESTIMATORS",
    "LOSS_AGGREGATIONS",
    "OFF_POLICY_CORRECTIONS",
    "ObjectiveOutput",
    "POLICY_LOSSES",
    "PolicyLossOutput",
    "Registry",
    "ZeroVarianceGroups",
    "add_reward_noise",
    "aggregate_loss",
    "behaviour_ratio",
    "clip_higher_loss",
    "clip_loss",
    "clipped_surrogate_loss",
    "completion_mask",
    "compute_advantages",
    "compute_correction",
    "compute_policy_loss",
    "concise_correct_bonus",
    "constant_normalizer_sum",
    "dr_grpo_advantages",
    "dual_clip_loss",
    "global_token_mean",
    "group_stats",
    "gspo_loss",
    "grpo_advantages",
    "inference_length_limit",
    "kl_divergence",
    "kl_k1",
    "kl_k2",
    "kl_k3",
    "kl_penalized_rewards",
    "length_penalty",
    "lengths_to_mask",
    "make_group_ids",
    "mask_after_eos",
    "mask_truncated",
    "masked_mean",
    "masked_sum",
    "micro_batch_weight",
    "next_token_log_probs",
    "overlong_penalty",
    "policy_objective",
    "reinforce_pp_baseline_advantages",
    "rloo_advantages",
    "scale_negative_advantages",
    "seq_mean_token_mean",
    "token_entropy",
    "token_log_probs",
    "token_log_probs_and_entropy",
    "token_mean",
    "truncated_importance_weights",
    "zero_variance_groups",
]
