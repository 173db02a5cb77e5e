"""Verifier-error rows (a code task's ``sandbox_error``: the infrastructure failed, not the
policy) are left out of GRPO's statistics: through the whole reward path of a GRPO step
(reward pipeline -> status -> advantages -> train rows), with the expected advantages worked
by hand from the GRPO formula A_i = (R_i - mean) / (std + eps), sample std (divisor n - 1),
eps = 1e-6 (rlvr.algo.advantages.DEFAULT_EPS)."""

import pytest
import torch
from step_state import ScriptedEngine, step_state

import rlvr.rewards.code as code_module
import rlvr.sandbox.pool as sandbox_pool
from rlvr.configio import load_config
from rlvr.records import Task
from rlvr.rewards.code import parse_detail
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.types import Status
from rlvr.rollout.types import RolloutOutput
from rlvr.sandbox import SandboxPool
from rlvr.train.config import RunConfig
from rlvr.train.grpo import GRPOStep

ADD = {"entry_point": "add", "tests": ["assert add(1, 2) == 3", "assert add(-5, 5) == 0"]}
DOWN = "# infrastructure-down"  # programs carrying this line cannot get a sandbox
RIGHT = "```python\ndef add(a, b):\n    return a + b\n```"
WRONG = "```python\ndef add(a, b):\n    return a - b\n```"
DOWN_PROGRAM = f"```python\n{DOWN}\ndef add(a, b):\n    return a + b\n```"
# B = 2 prompts x G = 4: group 0 has one sandbox_error row, group 1 only sandbox_error rows.
TEXTS = [RIGHT, WRONG, RIGHT, DOWN_PROGRAM] + [DOWN_PROGRAM] * 4


@pytest.fixture
def launcher_down_for_marked_programs(monkeypatch):
    """The sandbox launcher fails (OSError, as when bwrap / the interpreter cannot start) for
    programs holding ``DOWN``; the others run in a real sandbox. No pre-started sandboxes,
    so every job goes through the launcher."""
    real_launch = sandbox_pool.launch

    def launch(job, **kwargs):
        if DOWN in job.program:
            raise OSError("simulated: the sandbox launcher is unavailable")
        return real_launch(job, **kwargs)

    pool = SandboxPool(workers=1, prestart=False)
    monkeypatch.setattr(sandbox_pool, "launch", launch)
    monkeypatch.setattr(code_module, "default_pool", lambda: pool)
    yield
    pool.close()


class _Tokenizer:
    pad_token_id = 0

    def decode(self, ids, skip_special_tokens=True):
        return TEXTS[ids[0] - 1]  # row r's completion is the tokens [r + 1, 99]


def _step(*overrides):
    config = load_config(RunConfig, None, ["grpo.group_size=4", "grpo.prompts_per_step=2",
                                           "reward.workers=0",
                                           *overrides])
    rewards = RewardPipeline(config.reward)  # in-process: the patched launcher applies
    n = len(TEXTS)
    ids = torch.tensor([[r + 1, 99] for r in range(n)])
    engine = ScriptedEngine(lambda prompts, params: RolloutOutput(
        completion_ids=ids, completion_mask=torch.ones_like(ids, dtype=torch.bool),
        logprobs=torch.zeros(ids.shape), prompt_index=torch.tensor([0] * 4 + [1] * 4),
        finish_reason=["stop"] * n, lengths=torch.full((n,), 2)))
    tasks = [Task(id=f"add-{i}", prompt="Write add(a, b).", reference=ADD, task_type="code",
                  source="test") for i in range(2)]
    state = step_state(config, tasks, [[5, 6, 7], [8, 9]], engine, _Tokenizer(), rewards)
    step = GRPOStep(config)
    updates = []
    step.update = lambda state, batch: updates.append(batch) or {}
    return step, state, updates


def test_a_sandbox_error_row_is_left_out_of_its_groups_statistics(
        launcher_down_for_marked_programs):
    step, state, updates = _step()
    batch = step.run(state, step=1)

    statuses = [r.status for r in batch.results]
    assert statuses == [Status.correct, Status.wrong, Status.correct] + [Status.error] * 5
    for r in batch.results[3:]:
        assert parse_detail(r.detail)["sandbox"] == "sandbox_error", r.detail
    # reward = 1.0 * outcome + 0.1 * format (every completion is one fenced block); an error
    # row scores 0 whatever its format (the pipeline), and counting it would move the statistics
    torch.testing.assert_close(batch.rewards, torch.tensor([1.1, 0.1, 1.1] + [0.0] * 5))

    # Group 0 by hand, valid rows only: R = 1.1, 0.1, 1.1; mean = 2.3 / 3 = 0.766667;
    # deviations +1/3, -2/3, +1/3; sample variance (1/9 + 4/9 + 1/9) / 2 = 1/3;
    # std = 1/sqrt(3) = 0.5773503; A = dev / (0.5773503 + 1e-6) = +0.5773493, -1.1546986.
    # (Counted, the error row would make R = 1.1, 0.1, 1.1, 0.0: mean 0.575, std 0.6075909,
    # A = +0.8641, -0.7818, +0.8641, -0.9464.) The error row: advantage 0.
    # Group 1, only error rows: nothing to compare, advantage 0 everywhere.
    expected = torch.tensor([0.5773493, -1.1546986, 0.5773493, 0.0, 0.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(batch.advantages, expected, atol=1e-6, rtol=0)
    # the loss sees only the train rows: the error rows carry no loss weight
    assert batch.train.train_rows.tolist() == [0, 1, 2]
    assert len(updates) == 1 and updates[0].sequences.input_ids.shape[0] == 3
    assert batch.zero_variance.tolist() == [False, False]  # group 1 has no valid reward
    assert batch.metrics["verifier_errors"] == 5 and batch.metrics["train_rows"] == 3


def test_a_group_of_only_error_rows_trains_nothing():
    step, _, _ = _step()
    adv, rows, zero = step.advantages(torch.tensor([0.1, 1.1, 0.1, 1.1]),
                                      torch.tensor([0, 0, 0, 0]), torch.zeros(4, dtype=torch.bool))
    assert adv.tolist() == [0.0] * 4 and rows.tolist() == [] and zero.tolist() == [False]


@pytest.mark.parametrize("option, expected", [
    # Valid rewards of the batch: 1.1, 0.1, 1.1 (group 0) and 1.0, 0, 0, 0 (group 1); row 3
    # is an error row. Batch sample std over the 7 valid rewards: mean 3.3 / 7 = 0.4714286,
    # squared deviations sum to 1.8742857, / 6 = 0.3123810, std 0.5589105. Group means
    # 0.7666667 and 0.25: A = (R - group mean) / (0.5589105 + 1e-6).
    ("algo.std_scale=batch",
     [0.5963973, -1.1927947, 0.5963973, 0.0, 1.3418940, -0.4472980, -0.4472980, -0.4472980]),
    # REINFORCE++-baseline: a = R - group mean over valid rows (+1/3, -2/3, +1/3, 0.75, -0.25
    # x 3, mean 0), normalised by their sample std: sum of squares 2/3 + 0.75 = 1.4166667,
    # / 6 = 0.2361111, std 0.4859127; A = a / (0.4859127 + 1e-6).
    ("algo.advantage=reinforce_pp_baseline",
     [0.6859929, -1.3719859, 0.6859929, 0.0, 1.5434841, -0.5144947, -0.5144947, -0.5144947]),
])
def test_batch_statistics_leave_error_rows_out_too(option, expected):
    """With a batch-level std the error row's reward must not count either (it has 5.0 here:
    counted, it would change every other row's advantage)."""
    step, _, _ = _step(option)
    valid = torch.tensor([True, True, True, False, True, True, True, True])
    for error_reward in (0.1, 5.0):
        rewards = torch.tensor([1.1, 0.1, 1.1, error_reward, 1.0, 0.0, 0.0, 0.0])
        adv, rows, _ = step.advantages(rewards, torch.tensor([0] * 4 + [1] * 4), valid)
        torch.testing.assert_close(adv, torch.tensor(expected), atol=1e-6, rtol=0)
        assert rows.tolist() == [0, 1, 2, 4, 5, 6, 7]


def test_negative_advantage_scale_weights_the_steps_negative_rows():
    """``algo.negative_advantage_scale`` applies after the estimator, on the valid rows: group
    0 of ``test_batch_statistics_leave_error_rows_out_too`` (valid R = 1.1, 0.1, 1.1, error
    row 3), group 1 R = 1, 0, 0, 0. GRPO by hand: group 0 A = +0.5773493, -1.1546986,
    +0.5773493 (see the first test); group 1 mean 0.25, sample std 0.5, A = 0.75 / 0.500001 =
    1.4999970, -0.25 / 0.500001 = -0.4999990. Negatives x 0.25: -0.2886747, -0.1249998."""
    step, _, _ = _step("algo.negative_advantage_scale=0.25")
    valid = torch.tensor([True, True, True, False, True, True, True, True])
    rewards = torch.tensor([1.1, 0.1, 1.1, 0.1, 1.0, 0.0, 0.0, 0.0])
    adv, rows, _ = step.advantages(rewards, torch.tensor([0] * 4 + [1] * 4), valid)
    expected = [0.5773493, -0.2886747, 0.5773493, 0.0, 1.4999970, -0.1249998, -0.1249998,
                -0.1249998]
    torch.testing.assert_close(adv, torch.tensor(expected), atol=1e-6, rtol=0)
    assert rows.tolist() == [0, 1, 2, 4, 5, 6, 7]
