"""The off-policy correction inside the policy update: which one the config selects
(``auto`` resolved), its weights reaching the step, its metrics, and the config's errors."""

import copy
from types import SimpleNamespace

import pytest
import torch

from rlvr.algo.loss_agg import BatchCounts
from rlvr.configio import ConfigError, load_config
from rlvr.models.forward import build_sequences, completion_log_probs
from rlvr.models.tiny import tiny_model, tiny_tokenizer
from rlvr.train.config import RunConfig
from rlvr.update import LocalBackend, policy_update
from rlvr.update.corrections import correction_settings, resolve_correction
from rlvr.update.fused_layers import fused_layer_ops


def _config(**algo):
    return RunConfig.model_validate({
        "model": {"name": "tiny-random", "precision": "fp32"},
        "grpo": {"micro_batch_size": 4, "max_new_tokens": 6, "max_grad_norm": 1e3},
        "algo": {"kl_coef": 0.0, **algo}})


@pytest.mark.parametrize("algo, grpo, expected", [
    ({}, {}, "none"),                                    # synchronous: on-policy GRPO
    ({}, {"max_staleness": 2}, "decoupled"),             # stale samples
    ({"tis_cap": 2.0}, {}, "tis"),                       # an int8 sampler
    ({"tis_cap": 0.0}, {}, "none"),                      # 0: off
    ({"off_policy_correction": "icepop"}, {"max_staleness": 2}, "icepop"),
    ({"off_policy_correction": "none", "tis_cap": 2.0}, {}, "none"),
])
def test_auto_resolves_per_run(algo, grpo, expected):
    config = SimpleNamespace(algo=SimpleNamespace(**{"off_policy_correction": "auto", **algo}),
                             grpo=SimpleNamespace(**grpo))
    assert resolve_correction(config) == expected


def test_settings_carry_the_configured_caps():
    assert correction_settings(_config(off_policy_correction="mis", mis_cap=3.0)) == (
        "mis", {"cap": 3.0})
    assert correction_settings(_config(off_policy_correction="icepop", icepop_low=0.25)) == (
        "icepop", {"low": 0.25, "high": 5.0})
    assert correction_settings(_config(off_policy_correction="decoupled",
                                       decoupled_cap=None)) == ("decoupled", {"cap": None})
    assert correction_settings(_config(off_policy_correction="tis")) == ("tis", {"cap": 2.0})


def _batch():
    tok = tiny_tokenizer()
    prompts = [tok(t).input_ids for t in ("1+2=", "12*3-4=", "7=", "99-100+1=")]
    ids = torch.randint(4, len(tok), (4, 6), generator=torch.Generator().manual_seed(5))
    mask = torch.arange(6)[None, :] < torch.tensor([6, 4, 6, 3])[:, None]
    return build_sequences(prompts, ids, mask, tok.pad_token_id)


def _step(config, sampler_shift=None):
    """One update of a fresh tiny policy; the sampler's log-probs are the policy's own (the
    same forward as the update's, fused layer ops included), shifted by ``sampler_shift``
    where given."""
    torch.manual_seed(0)
    policy = tiny_model(tiny_tokenizer(), seed=3, hidden_size=32, layers=2).float()
    seqs = _batch()
    with torch.no_grad(), fused_layer_ops(policy):
        sampler = completion_log_probs(policy, seqs, bf16=False)
    if sampler_shift is not None:
        sampler = sampler + sampler_shift
    opt = torch.optim.SGD(policy.parameters(), lr=0.5)
    counts = BatchCounts(rows=4, tokens=int(seqs.loss_mask.sum()))
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    metrics = policy_update(LocalBackend(policy), opt, seqs, adv, None, config, counts,
                            sampler_log_probs=sampler, bf16=False)
    return torch.cat([p.detach().flatten() for p in policy.parameters()]), metrics


def test_a_correction_of_an_on_policy_sample_changes_nothing():
    """rho = 1 on every token: every correction's weight is exactly 1."""
    base, metrics = _step(_config())
    assert metrics["is_ratio_mean"] == 1.0 and metrics["rollout_logprob_gap"] == 0.0
    assert "is_weight_mean" not in metrics
    for name in ("decoupled", "mis", "icepop", "tis"):
        same, corrected = _step(_config(off_policy_correction=name))
        torch.testing.assert_close(same, base, atol=0, rtol=0)
        assert corrected["is_weight_mean"] == 1.0 and corrected["is_masked_fraction"] == 0.0


def test_masked_tokens_count_and_change_the_step():
    """The sampler found token (0, 0) e^3 times less likely than the trainer: rho = e^3 > 2,
    so mis drops it, 1 of the step's 19 tokens."""
    shift = torch.zeros(4, 6)
    shift[0, 0] = -3.0
    base, _ = _step(_config())
    moved, metrics = _step(_config(off_policy_correction="mis"), shift)
    assert metrics["is_masked_fraction"] == pytest.approx(1 / 19)
    assert metrics["is_ratio_max"] == pytest.approx(torch.exp(torch.tensor(3.0)).item(),
                                                    rel=1e-5)
    assert metrics["rollout_logprob_gap"] == pytest.approx(3 / 19, rel=1e-5)
    assert metrics["rollout_logprob_gap_max"] == pytest.approx(3.0, rel=1e-5)
    assert not torch.equal(moved, base)
    # tis keeps the token at weight 2 instead: another step again
    truncated, tis = _step(_config(off_policy_correction="tis"), shift)
    assert tis["is_truncated_fraction"] == pytest.approx(1 / 19)
    assert not torch.equal(truncated, moved)


def test_a_correction_without_sampler_log_probs_is_refused():
    config = _config(off_policy_correction="icepop")
    seqs = _batch()
    with pytest.raises(ValueError, match="algo.off_policy_correction: icepop is set but the "
                                         "rollout has no sampler log-probs"):
        policy_update(None, None, seqs, torch.zeros(4), None, config, None)


@pytest.mark.parametrize("overrides, message", [
    (["algo.off_policy_correction=ice_pop"], "did you mean 'icepop'"),
    (["algo.mis_cap=3"], "mis_cap: 3.0 applies to off_policy_correction: mis only"),
    (["algo.mis_cap=1"], "algo.mis_cap: Input should be greater than 1"),
    (["algo.icepop_low=1.5"], "algo.icepop_low: Input should be less than 1"),
    (["algo.policy_loss=gspo", "algo.clip_eps=0.1"], "clip_eps: 0.1 does not apply"),
    (["algo.gspo_token=true"], "gspo_token: True applies to policy_loss: gspo only"),
])
def test_config_errors_name_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(RunConfig, None, overrides)


def test_valid_combinations_load():
    for overrides in (["algo.off_policy_correction=icepop", "algo.icepop_high=3"],
                      ["algo.policy_loss=gspo", "algo.gspo_eps_high=1e-3"],
                      ["algo.decoupled_cap=null"],
                      ["rollout.quantization=int8", "algo.off_policy_correction=mis"]):
        config = load_config(RunConfig, None, overrides)
        assert copy.deepcopy(config).algo == config.algo
