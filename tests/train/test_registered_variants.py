"""A variant registered in a test (here a KL estimator and a loss aggregation) is selectable in
a config and used by the GRPO update, with no other edit: the config checks names against the
registries, and the update asks the loss aggregation's entry for its options and weight."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.algo.kl import kl_k3  # noqa: E402
from rlvr.algo.loss_agg import row_share  # noqa: E402
from rlvr.algo.objective import policy_objective  # noqa: E402
from rlvr.algo.registry import KL_ESTIMATORS, LOSS_AGGREGATIONS  # noqa: E402
from rlvr.algo.utils import masked_sum  # noqa: E402
from rlvr.configio import ConfigError, load_config  # noqa: E402
from rlvr.models.forward import build_sequences, completion_log_probs  # noqa: E402
from rlvr.models.tiny import tiny_model, tiny_tokenizer  # noqa: E402
from rlvr.train.batch import TrainBatch  # noqa: E402
from rlvr.train.config import RunConfig  # noqa: E402
from rlvr.train.grpo import GRPOStep  # noqa: E402
from rlvr.train.setup import kl_controller  # noqa: E402
from rlvr.train.state import ModelState, OptimState, TrainingState  # noqa: E402

KL_NAME, AGG_NAME = "test_twice_k3", "test_token_sum_per_row"
SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"


@pytest.fixture
def variants():
    """Registers the two variants for one test; ``calls`` counts the estimator's calls."""
    calls = {"kl": 0}

    @KL_ESTIMATORS.register(KL_NAME)
    def twice_k3(log_probs, ref_log_probs):
        calls["kl"] += 1
        return 2.0 * kl_k3(log_probs, ref_log_probs)

    # sum over a micro-batch's tokens / its rows; weighted by rows, the step's loss is the sum
    # over all tokens / all rows of the step
    @LOSS_AGGREGATIONS.register(AGG_NAME, weight=row_share)
    def token_sum_per_row(token_loss, mask, **options):
        return masked_sum(token_loss, mask) / token_loss.shape[0]

    yield calls
    KL_ESTIMATORS.unregister(KL_NAME)
    LOSS_AGGREGATIONS.unregister(AGG_NAME)


def _config(**algo) -> RunConfig:
    return RunConfig.model_validate({
        "model": {"name": "tiny-random", "precision": "fp32"},
        "grpo": {"micro_batch_size": 3, "max_new_tokens": 8, "max_grad_norm": 1e3},
        "algo": {"kl_coef": 0.1, "clip_eps": 0.2, **algo},
    })


def _batch():
    tok = tiny_tokenizer()
    prompts = [tok(t).input_ids for t in ("1+2=", "12*3-4=", "7=", "99-100+1=") for _ in range(2)]
    lengths = torch.tensor([5, 2, 6, 1, 4, 3, 6, 2])
    ids = torch.randint(4, len(tok), (8, 6), generator=torch.Generator().manual_seed(11))
    mask = torch.arange(6)[None, :] < lengths[:, None]
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.2, -1.2, 0.7, -0.7])
    return build_sequences(prompts, ids, mask, tok.pad_token_id), adv


def _models():
    policy = tiny_model(tiny_tokenizer(), seed=3, hidden_size=32, layers=2).float()
    reference = tiny_model(tiny_tokenizer(), seed=4, hidden_size=32, layers=2).float()
    return policy, reference, torch.optim.SGD(policy.parameters(), lr=0.5)


def test_config_accepts_registered_names_and_refuses_others(variants):
    config = _config(kl_estimator=KL_NAME, loss_agg=AGG_NAME)
    assert (config.algo.kl_estimator, config.algo.loss_agg) == (KL_NAME, AGG_NAME)
    with pytest.raises(ConfigError) as err:
        load_config(RunConfig, None, ["algo.kl_estimator=test_twice_k4"])
    assert str(err.value).startswith(
        "--set 'algo.kl_estimator=test_twice_k4': algo.kl_estimator: unknown KL estimator "
        "'test_twice_k4'; did you mean 'test_twice_k3'? registered: k1, k2, k3, "
        "test_twice_k3")
    for field in ("advantage", "policy_loss", "loss_agg"):
        with pytest.raises(ConfigError, match=f"algo.{field}: unknown [a-z ]+ 'nope'"):
            load_config(RunConfig, None, [f"algo.{field}=nope"])


def test_grpo_update_uses_the_registered_variants(variants):
    """Micro-batches of 3 over 8 rows with the new aggregation's registered weight give the
    update of one backward over all rows."""
    seqs, adv = _batch()
    config = _config(kl_estimator=KL_NAME, loss_agg=AGG_NAME)
    policy, reference, opt = _models()
    schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    state = TrainingState(models=ModelState(policy=policy, reference=reference),
                          optim=OptimState(opt, schedule, kl=kl_controller(config)))
    metrics = GRPOStep(config).update(state, TrainBatch(
        train_rows=torch.arange(8), sequences=seqs, advantages=adv,
        sampler_log_probs=torch.zeros(8, 6)))
    assert variants["kl"] == 3 and metrics["kl"] > 0  # once per micro-batch
    assert metrics["update_skipped_nonfinite"] == 0.0

    expected, reference, opt = _models()
    full = seqs.trimmed()
    logp = completion_log_probs(expected, full, bf16=False, shared_prefix=True)
    with torch.no_grad():
        ref = completion_log_probs(reference, full, bf16=False, shared_prefix=True)
    policy_objective(logp, logp.detach(), adv, full.completion_mask, ref_log_probs=ref,
                     kl_coef=0.1, kl_estimator=KL_NAME, loss_agg=AGG_NAME,
                     policy_loss_options={"eps": 0.2}).loss.backward()
    opt.step()
    moved = 0.0
    initial = _models()[0].state_dict()
    for key, want in expected.state_dict().items():
        torch.testing.assert_close(policy.state_dict()[key], want, rtol=1e-5, atol=1e-6)
        moved = max(moved, float((want - initial[key]).abs().max()))
    assert moved > 1e-4


def test_a_run_trains_with_the_registered_variants(variants, tmp_path):
    from rlvr.train.run import Run

    # no SFT (fast): the untrained model's rewards are all 0, so a length penalty gives the
    # groups the reward variance that makes rows trainable
    config = load_config(RunConfig, SMOKE, [
        f"algo.kl_estimator={KL_NAME}", f"algo.loss_agg={AGG_NAME}", "sft.enabled=false",
        "algo.length_penalty=0.5", "grpo.steps=2", "eval.pass_at_k_samples=0",
        "eval.every=0", "logging.tensorboard=false"])
    Run(config, tmp_path / "run").train()
    metrics = [json.loads(line) for line in
               (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    trained = [m for m in metrics if m["train_rows"]]
    assert trained and variants["kl"] > 0
    assert all(m["update_skipped_nonfinite"] == 0.0 and m["kl"] >= 0 for m in trained)
