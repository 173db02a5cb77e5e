"""The EMA of the policy's weights (``grpo.ema_decay``, rlvr.train.weight_average): the update
by hand, the swap for evaluation, and on tiny-model runs: the trajectory is the run's without
an average, every checkpoint's model files are the recurrence over the policy's own weights
(saved beside them), and a resume and a rollback restore both."""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rlvr.configio import load_config  # noqa: E402
from rlvr.train.config import RunConfig  # noqa: E402
from rlvr.train.weight_average import (  # noqa: E402
    PolicyAverage,
    ema_update_,
    load_trainable_state,
    restore_average,
    trainable_state,
)

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs" / "smoke.yaml"
FAST = ["eval.pass_at_k_samples=0", "eval.every=2", "logging.tensorboard=false",
        "checkpoint.every=1", "checkpoint.keep=10"]
TIMING = ("seconds_rollout", "seconds_reward", "seconds_update", "tokens_per_second",
          "seconds")


def test_ema_update_by_hand():
    avg = [torch.tensor([1.0, 2.0]), torch.tensor([[4.0]])]
    ema_update_(avg, [torch.tensor([3.0, 6.0]), torch.tensor([[0.0]])], 0.75)
    # 0.75 * 1 + 0.25 * 3 = 1.5; 0.75 * 2 + 0.25 * 6 = 3; 0.75 * 4 + 0 = 3
    assert avg[0].tolist() == [1.5, 3.0] and avg[1].tolist() == [[3.0]]
    ema_update_(avg, [torch.tensor([1.5, 3.0]), torch.tensor([[3.0]])], 0.5)  # a fixed point
    assert avg[0].tolist() == [1.5, 3.0]
    ema_update_(avg, [torch.tensor([7.0, -1.0]), torch.tensor([[1.0]])], 0.0)  # d = 0 copies
    assert avg[0].tolist() == [7.0, -1.0] and avg[1].tolist() == [[1.0]]


@pytest.mark.parametrize("decay", [-0.1, 1.0, 1.5])
def test_ema_update_rejects_a_decay_outside_0_1(decay):
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        ema_update_([torch.zeros(1)], [torch.zeros(1)], decay)


def test_ema_update_rejects_mismatched_weights():
    with pytest.raises(ValueError, match="2 averages for 1 weights"):
        ema_update_([torch.zeros(1), torch.zeros(1)], [torch.zeros(1)], 0.5)
    with pytest.raises(ValueError, match=r"shape \(2,\) for weights \(3,\)"):
        ema_update_([torch.zeros(2)], [torch.zeros(3)], 0.5)


def _net():
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    with torch.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(torch.full_like(p, float(i)))
    net[1].bias.requires_grad_(False)  # frozen: copied once, never averaged
    return net


def test_policy_average_tracks_the_trainable_weights_only():
    net = _net()
    average = PolicyAverage(net, 0.5)
    assert average.model is not net and not any(p.requires_grad for p in average.model.parameters())
    with torch.no_grad():
        net[0].weight.fill_(4.0)   # was 0
        net[1].bias.fill_(9.0)     # frozen, was 3
    average.update(net)
    assert average.model[0].weight.unique().tolist() == [2.0]   # 0.5 * 0 + 0.5 * 4
    assert average.model[0].bias.unique().tolist() == [1.0]     # unchanged weights stay
    assert average.model[1].bias.tolist() == [3.0]               # not averaged
    with torch.no_grad():
        net[0].weight.fill_(6.0)
    average.update(net)
    assert average.model[0].weight.unique().tolist() == [4.0]   # 0.5 * 2 + 0.5 * 6
    assert average.updates == 2
    with pytest.raises(ValueError, match="ema_decay"):
        PolicyAverage(net, 0.0)


def test_applied_swaps_the_average_in_and_restores_the_policy_bit_for_bit():
    net = _net()
    average = PolicyAverage(net, 0.9)
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[0.1, 0.2], [0.3, 0.7]]))
    average.update(net)
    own = {k: v.clone() for k, v in net.state_dict().items()}
    params = list(net.parameters())
    with average.applied(net):
        assert torch.equal(net[0].weight, average.model[0].weight)
    assert all(torch.equal(own[k], v) for k, v in net.state_dict().items())
    with pytest.raises(RuntimeError, match="boom"), average.applied(net):
        raise RuntimeError("boom")
    assert all(torch.equal(own[k], v) for k, v in net.state_dict().items())
    assert all(a is b for a, b in zip(params, net.parameters()))  # the optimizer's objects


def test_restore_average_from_a_checkpoint():
    net = _net()
    saved_own = trainable_state(net)
    with torch.no_grad():  # the checkpoint's files (an average) were loaded into the policy
        net[0].weight.fill_(5.0)
    average = restore_average(net, saved_own, 0.9, 7)
    assert average.model[0].weight.unique().tolist() == [5.0] and average.updates == 7
    assert torch.equal(net[0].weight, saved_own["0.weight"])
    assert restore_average(net, None, 0.0, 7) is None  # no average kept, files = policy
    assert restore_average(net, None, 0.9, 7).updates == 0  # files = policy: starts there
    with pytest.raises(KeyError, match="missing"):
        load_trainable_state(net, {"0.weight": saved_own["0.weight"]})


def _train(run_dir: Path, *overrides, resume: bool = False) -> dict:
    from rlvr.train.run import Run

    config = load_config(RunConfig, SMOKE, [*FAST, *overrides])
    return Run(config, run_dir, resume=resume).train()


def _metrics(run_dir: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(x).items() if k not in TIMING}
            for x in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _files(run_dir: Path, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(str(run_dir / "checkpoints" / f"step-{step:06d}" / "model.safetensors"))


def _own(run_dir: Path, step: int) -> dict:
    path = run_dir / "checkpoints" / f"step-{step:06d}" / "trainer_state.pt"
    return torch.load(path, weights_only=False)["policy_weights"]


class _Root(type(Path())):
    synced: dict
    results: dict


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 4-step smoke run without and with an average (decay 0.5), checkpoints every step;
    ``.synced``: the weights each validation of the second gave the engine, by step."""
    import rlvr.train.evaluation as evaluation

    root = _Root(tmp_path_factory.mktemp("ema"))
    root.results = {"plain": _train(root / "plain", "grpo.steps=4")}
    root.synced, real = {}, evaluation.sync_engine

    def recording(engine, policy):
        step = len(root.synced) * 2  # validations at steps 0, 2, 4 (eval.every=2)
        root.synced[step] = {k: v.clone() for k, v in trainable_state(policy).items()}
        real(engine, policy)

    evaluation.sync_engine = recording
    try:
        root.results["ema"] = _train(root / "ema", "grpo.steps=4", "grpo.ema_decay=0.5")
    finally:
        evaluation.sync_engine = real
    return root


def test_the_average_leaves_the_trajectory_unchanged(runs):
    assert _metrics(runs / "ema") == _metrics(runs / "plain")
    for step in range(5):  # the policy's own weights are the plain run's, step for step
        plain, own = _files(runs / "plain", step), _own(runs / "ema", step)
        assert set(own) == set(plain) and all(torch.equal(own[k], plain[k]) for k in own)


def test_checkpoints_hold_the_recurrence_of_the_average(runs):
    files = _files(runs / "ema", 0)
    assert all(torch.equal(files[k], v) for k, v in _own(runs / "ema", 0).items())
    for step in range(1, 5):  # avg_t = 0.5 * avg_{t-1} + 0.5 * theta_t, by hand
        prev, files, own = files, _files(runs / "ema", step), _own(runs / "ema", step)
        for k in own:
            torch.testing.assert_close(files[k], 0.5 * prev[k] + 0.5 * own[k], rtol=0,
                                       atol=1e-6)
        assert any(not torch.equal(files[k], own[k]) for k in own)  # not the last iterate


def test_validation_measures_the_average(runs):
    """Each validation synced the engine from the average (the checkpoint's files), not from
    the policy's own weights."""
    synced = runs.synced  # step -> the weights the engine was given at that validation
    assert sorted(synced) == [0, 2, 4]
    for step, weights in synced.items():
        files, own = _files(runs / "ema", step), _own(runs / "ema", step)
        assert all(torch.equal(weights[k], files[k]) for k in own)
        if step:
            assert any(not torch.equal(weights[k], own[k]) for k in own)


def test_results_say_which_model_trained_measured(runs):
    from rlvr.train.run import results_table

    assert runs.results["ema"]["weight_average"] == {"decay": 0.5, "updates": 4}
    assert runs.results["plain"]["weight_average"] is None
    labels = [list(results_table(runs.results[k]).columns[0].cells) for k in ("ema", "plain")]
    assert labels == [["baseline (entered GRPO)", "trained (GRPO, EMA 0.5)"],
                      ["baseline (entered GRPO)", "trained (GRPO)"]]


def test_a_resumed_run_with_an_average_equals_the_whole_run(tmp_path, runs):
    run_dir = tmp_path / "run"
    _train(run_dir, "grpo.steps=2", "grpo.ema_decay=0.5")
    results = _train(run_dir, "grpo.steps=4", "grpo.ema_decay=0.5", resume=True)
    assert _metrics(run_dir) == _metrics(runs / "ema")
    assert results["weight_average"] == runs.results["ema"]["weight_average"]  # 4 updates
    whole, resumed = _files(runs / "ema", 4), _files(run_dir, 4)
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)


def test_a_rollback_restores_the_policy_and_its_average(tmp_path, monkeypatch):
    import rlvr.train.grpo as grpo
    from rlvr.train.hooks import RollbackHook, rollback_target

    real_run = grpo.GRPOStep.run

    def grow(self, state, step):  # from step 3 completions grow: a health check
        # (format collapse or length inflation) rolls back
        if step >= 3:
            state.stop_ids = ()
            self.config.grpo.max_new_tokens = 20 + 10 * step
        return real_run(self, state, step)

    monkeypatch.setattr(grpo.GRPOStep, "run", grow)
    seen = {}
    real_rollback = RollbackHook.rollback

    def rollback(self, step, *args):
        seen["target"] = rollback_target(self.run_dir, self.config, step).name
        real_rollback(self, step, *args)
        models = self.state.models
        seen["policy"] = {k: v.clone() for k, v in trainable_state(models.policy).items()}
        seen["average"] = {k: v.clone() for k, v in models.average.model.state_dict().items()}

    monkeypatch.setattr(RollbackHook, "rollback", rollback)
    run_dir = tmp_path / "run"
    _train(run_dir, "grpo.steps=6", "grpo.ema_decay=0.5", "eval.every=0", "health.window=3",
           "health.min_history=2", "health.length_inflation.action=rollback",
           "health.rollback_margin=1")  # the alert may come at step 3: restore step 2, not 0
    alerts = [json.loads(x) for x in (run_dir / "alerts.jsonl").read_text().splitlines()]
    assert [a["action"] for a in alerts].count("rollback") == 1
    target = int(seen["target"].split("-")[1])
    assert target >= 1  # a checkpoint after an update: its average is not its policy
    own, files = _own(run_dir, target), _files(run_dir, target)
    assert all(torch.equal(seen["policy"][k], own[k]) for k in own)
    assert all(torch.equal(seen["average"][k], files[k]) for k in files)
    assert any(not torch.equal(own[k], files[k]) for k in own)
