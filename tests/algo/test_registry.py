"""Registry entries own their options and (loss aggregations) their micro-batch weights, so a
trainer asks the registry instead of checking names."""

from types import SimpleNamespace

import pytest
import torch

from rlvr.algo import (
    ADVANTAGE_ESTIMATORS,
    KL_ESTIMATORS,
    LOSS_AGGREGATIONS,
    POLICY_LOSSES,
    BatchCounts,
    micro_batch_weight,
)
from rlvr.algo.registry import VariantMeta, VariantRegistry

CONFIG = SimpleNamespace(algo=SimpleNamespace(std_scale="batch", clip_eps=0.1, clip_eps_high=0.3),
                         grpo=SimpleNamespace(max_new_tokens=24))


def test_entries_carry_their_options():
    reg = VariantRegistry("widget", VariantMeta)
    reg.register("plain")(len)
    reg.register("tuned", options=lambda config: {"eps": config.algo.clip_eps})(abs)
    assert reg.options("plain", CONFIG) == {}
    assert reg.options("tuned", CONFIG) == {"eps": 0.1}
    assert reg.entry("tuned").obj is abs and reg.get("tuned") is abs
    reg.unregister("tuned")
    assert "tuned" not in reg
    reg.unregister("never-registered")  # ignored


def test_an_entry_declares_only_what_its_kind_takes():
    with pytest.raises(TypeError, match="does not take options"):
        KL_ESTIMATORS.register("test_kl", options=lambda config: {})
    with pytest.raises(TypeError, match="needs weight"):
        LOSS_AGGREGATIONS.register("test_agg")
    with pytest.raises(TypeError, match="does not take weight"):
        POLICY_LOSSES.register("test_loss", weight=lambda mask, counts, world: 1.0)
    assert "test_kl" not in KL_ESTIMATORS and "test_agg" not in LOSS_AGGREGATIONS


def test_builtin_options_come_from_the_config():
    assert ADVANTAGE_ESTIMATORS.options("grpo", CONFIG) == {"std_scale": "batch"}
    for name in ("dr_grpo", "rloo", "reinforce_pp_baseline"):
        assert ADVANTAGE_ESTIMATORS.options(name, CONFIG) == {}
    assert POLICY_LOSSES.options("clip", CONFIG) == {"eps": 0.1}
    assert POLICY_LOSSES.options("dual_clip", CONFIG) == {"eps": 0.1}
    assert POLICY_LOSSES.options("clip_higher", CONFIG) == {"eps_low": 0.1, "eps_high": 0.3}
    counts = BatchCounts(rows=4, tokens=37)
    assert LOSS_AGGREGATIONS.options("grpo", CONFIG, counts) == {}
    assert LOSS_AGGREGATIONS.options("bnpo", CONFIG, counts) == {}
    assert LOSS_AGGREGATIONS.options("dapo", CONFIG, counts) == {"global_token_count": 37}
    assert LOSS_AGGREGATIONS.options("dapo", CONFIG, BatchCounts(0, 0)) == {
        "global_token_count": 1}
    assert LOSS_AGGREGATIONS.options("dr_grpo", CONFIG, counts) == {"max_completion_length": 24}


def test_micro_batch_weights_by_hand():
    """A micro-batch of n = 2 rows and k = 4 tokens in a step of N = 5 rows, K = 10 tokens."""
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 1, 1], [1, 1, 1], [1, 0, 0]], dtype=torch.bool)
    micro = mask[1:3]
    expected = {"grpo": 2 / 5, "dr_grpo": 2 / 5, "bnpo": 4 / 10, "dapo": 1.0}
    for name, weight in expected.items():
        assert micro_batch_weight(name, micro, 5, 10) == weight, name
        assert micro_batch_weight(name, micro, 5, 10, 4) == pytest.approx(4 * weight), name


def test_unknown_name_message_names_the_closest_and_all():
    assert LOSS_AGGREGATIONS.unknown_message("dapo2") == (
        "algo.loss_agg: unknown loss aggregation 'dapo2'; did you mean 'dapo'? registered: "
        "bnpo, dapo, dr_grpo, grpo")
    assert KL_ESTIMATORS.unknown_message("zz") == (
        "algo.kl_estimator: unknown KL estimator 'zz'; registered: k1, k2, k3")
