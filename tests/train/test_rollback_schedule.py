"""A rollback re-creates the LR schedule from its scale at the restored position
(rlvr.train.schedule.warmup_schedule) instead of patching ``scheduler.base_lrs``:
the learning rates after one or two rollbacks are exactly those of the patching code."""

import pytest

torch = pytest.importorskip("torch")

from rlvr.train.schedule import grpo_optimizer, warmup_schedule  # noqa: E402
from rlvr.train.sections import GRPOConfig  # noqa: E402


def _model():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 2)


def _train_step(model, optimizer, scheduler):
    optimizer.zero_grad()
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    scheduler.step()


def _lrs(grpo, rollbacks, factor, steps, rebuild):
    """LR after every step of ``steps``; at each step in ``rollbacks`` the optimizer and
    scheduler states saved at step 2 are restored and the LR scale multiplied by ``factor``,
    by re-creating the schedule (``rebuild``) or by the old patching of ``base_lrs``."""
    model = _model()
    optimizer = grpo_optimizer(model, grpo)
    scheduler = warmup_schedule(optimizer, grpo)
    scale, saved, out = 1.0, None, []
    for step in range(1, steps + 1):
        _train_step(model, optimizer, scheduler)
        if step == 2:
            saved = (optimizer.state_dict(), scheduler.state_dict())
        if step in rollbacks:
            optimizer.load_state_dict(saved[0])
            scheduler.load_state_dict(saved[1])
            scale *= factor
            if rebuild:
                scheduler = warmup_schedule(optimizer, grpo, scale, scheduler.last_epoch)
            else:  # what rlvr.train.run.Run._rollback did before the warm-up schedule
                scheduler.base_lrs = [grpo.learning_rate * scale for _ in scheduler.base_lrs]
                lam = scheduler.lr_lambdas[0](scheduler.last_epoch)
                for group, base in zip(optimizer.param_groups, scheduler.base_lrs):
                    group["lr"] = base * lam
        out.append(optimizer.param_groups[0]["lr"])
    return out


@pytest.mark.parametrize("warmup, factor", [(0, 0.5), (6, 0.5), (6, 0.3), (2, 0.7)])
def test_lr_sequence_after_rollbacks_equals_the_patching_one(warmup, factor):
    grpo = GRPOConfig(learning_rate=3e-5, warmup_steps=warmup)
    old = _lrs(grpo, {4, 7}, factor, 12, rebuild=False)
    new = _lrs(grpo, {4, 7}, factor, 12, rebuild=True)
    assert new == old  # exactly: the same products of the same floats
    assert new[3] < new[2]  # the rollback lowered it


def test_a_fresh_schedule_is_the_warmup_one():
    grpo = GRPOConfig(learning_rate=1e-4, warmup_steps=4)
    optimizer = grpo_optimizer(_model(), grpo)
    warmup_schedule(optimizer, grpo)
    assert optimizer.param_groups[0]["lr"] == 1e-4 * 0.25


def test_lr_factor_by_hand():
    """4 steps, no warm-up: linear 1, 3/4, 1/2, 1/4 (transformers' linear schedule ends
    at 1 / steps on the last step); cosine (1 + cos(pi * s / 4)) / 2."""
    from rlvr.train.schedule import lr_factor

    assert [lr_factor(s, 0, 4, "constant") for s in range(4)] == [1.0] * 4
    assert [lr_factor(s, 0, 4, "linear") for s in range(4)] == [1.0, 0.75, 0.5, 0.25]
    cos = [lr_factor(s, 0, 4, "cosine") for s in range(4)]
    r = 2 ** -0.5  # cos(pi / 4)
    assert cos == pytest.approx([1.0, (1 + r) / 2, 0.5, (1 - r) / 2])
    # 2 warm-up steps of 6: 1/2, 1, then linear over the remaining 4 from 1
    assert [lr_factor(s, 2, 6, "linear") for s in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5,
                                                                 0.25]
    assert lr_factor(9, 2, 6, "cosine") == 0.0  # past the end (a resume with fewer steps)
    with pytest.raises(ValueError, match="grpo.lr_schedule"):
        lr_factor(0, 0, 4, "step")


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_decaying_schedule_drives_the_optimizer_and_survives_a_rollback(schedule):
    from rlvr.train.schedule import lr_factor

    grpo = GRPOConfig(learning_rate=2e-5, steps=8, lr_schedule=schedule)
    new = _lrs(grpo, {5}, 0.5, 8, rebuild=True)
    # after step i the scheduler sits at position i (the LR step i + 1 runs at); the rollback
    # at step 5 restores position 2 (saved after step 2) at half the scale, and steps 6..8
    # move it on to 3, 4, 5
    expected = [2e-5 * lr_factor(i, 0, 8, schedule) for i in range(1, 5)]
    expected += [1e-5 * lr_factor(i, 0, 8, schedule) for i in (2, 3, 4, 5)]
    assert new == pytest.approx(expected, rel=1e-12)
    assert GRPOConfig().lr_schedule == "constant"  # the default keeps verl's constant LR
