"""DAPO's dynamic sampling inside a step (Yu et al. 2025, Sec. 3.2): while fewer than
``prompts_per_step`` groups have reward variance, another round of prompts is drawn, rolled out
(with its own seed) and scored; the update trains the first ``prompts_per_step`` groups with
variance in draw order. Worked by hand with a scripted rollout: G = 2, so a group with two
different rewards has advantages +-1/sqrt(2) (sample std)."""

import torch
from step_state import ScriptedEngine, step_state

from rlvr.configio import load_config
from rlvr.records import Task
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rollout.types import RolloutOutput
from rlvr.train.config import RunConfig
from rlvr.train.grpo import GRPOStep
from rlvr.train.rollouts import sampling_params

RIGHT, WRONG = "1 + 2 = 3\n#### 3", "1 + 2 = 4\n#### 4"
# per round, per task: the G = 2 completions
ROUNDS = [[(RIGHT, RIGHT), (RIGHT, WRONG)],          # round 0: one group with variance
          [(WRONG, RIGHT), (RIGHT, WRONG)],          # round 1: two more
          [(RIGHT, WRONG), (RIGHT, WRONG)]]          # round 2: never drawn
TEXTS = [t for r in ROUNDS for g in r for t in g]


class _Tokenizer:
    pad_token_id = 0

    def decode(self, ids, skip_special_tokens=True):
        return TEXTS[ids[0] - 1]


def _tasks(n, start):
    return [Task(id=f"t{start + i}", prompt="1 + 2?", reference="3", task_type="math",
                 source="test") for i in range(n)]


def _step(rounds: int):
    """The step, its state (tasks t0 .. t5 drawn in order), the rollouts' seeds, the sampler's
    draws and the update's batches."""
    config = load_config(RunConfig, None, [
        "grpo.group_size=2", "grpo.prompts_per_step=2", "reward.workers=0",
        f"grpo.dynamic_sampling_rounds={rounds}"])
    seeds = []

    def rollout(prompts, params):
        seeds.append(params.seed)
        first = 4 * (len(seeds) - 1) + 1  # rows' text ids
        ids = torch.tensor([[first + r, 99] for r in range(4)])
        return RolloutOutput(completion_ids=ids, completion_mask=torch.ones_like(ids).bool(),
                             logprobs=torch.zeros(ids.shape),
                             prompt_index=torch.tensor([0, 0, 1, 1]),
                             finish_reason=["stop"] * 4, lengths=torch.full((4,), 2))

    state = step_state(config, _tasks(6, 0), [[5, 6]] * 6, ScriptedEngine(rollout), _Tokenizer(),
                       RewardPipeline(config.reward))
    step = GRPOStep(config)
    updates = []
    step.update = lambda state, batch: updates.append(batch) or {}
    return step, state, seeds, updates


def test_rounds_until_the_batch_has_prompts_per_step_groups_with_variance():
    step, state, seeds, updates = _step(rounds=2)
    batch = step.run(state, step=3)
    assert state.progress.sampler.drawn == [[0, 1], [2, 3]]  # one extra round of 2 tasks
    assert [t.id for t in batch.tasks] == ["t0", "t1", "t2", "t3"]
    assert batch.task_indices == [0, 1, 2, 3]
    assert len(set(seeds)) == 2              # the extra round samples with its own seed
    assert seeds[1] == sampling_params(step.config, (99,), 3, 1).seed
    assert batch.zero_variance.tolist() == [True, False, False, False]
    # trained: the first two groups with variance (tasks t1, t2); t3 is dropped
    assert updates[0].train_rows.tolist() == [2, 3, 4, 5]
    h = 2 ** -0.5
    torch.testing.assert_close(batch.advantages, torch.tensor([0, 0, h, -h, -h, h, 0, 0]),
                               atol=1e-5, rtol=0)
    assert batch.metrics["sampling_rounds"] == 2 and batch.metrics["dropped_groups"] == 1
    assert batch.metrics["zero_variance_fraction"] == 0.25


def test_off_by_default_one_round_and_the_plain_step():
    step, state, seeds, updates = _step(rounds=0)
    batch = step.run(state, step=3)
    assert state.progress.sampler.drawn == [[0, 1]] and len(seeds) == 1
    assert seeds[0] == step.config.seed * 1_000_003 + 3  # round 0: no round offset
    assert updates[0].train_rows.tolist() == [2, 3]
    assert "sampling_rounds" not in batch.metrics


def test_concat_rollouts_pads_and_renumbers_prompts():
    from rlvr.rollout.types import concat_rollouts

    a = RolloutOutput(completion_ids=torch.tensor([[7, 8], [9, 0]]),
                      completion_mask=torch.tensor([[True, True], [True, False]]),
                      logprobs=torch.tensor([[-0.5, -0.25], [-1.0, 0.0]]),
                      prompt_index=torch.tensor([0, 0]), finish_reason=["stop", "length"],
                      lengths=torch.tensor([2, 1]))
    b = RolloutOutput(completion_ids=torch.tensor([[4, 5, 6]]),
                      completion_mask=torch.tensor([[True, True, True]]),
                      logprobs=torch.tensor([[-0.1, -0.2, -0.3]]),
                      prompt_index=torch.tensor([0]), finish_reason=["stop"],
                      lengths=torch.tensor([3]))
    out = concat_rollouts([a, b], [1, 1])
    assert out.completion_ids.tolist() == [[7, 8, 0], [9, 0, 0], [4, 5, 6]]
    assert out.completion_mask.tolist() == [[True, True, False], [True, False, False],
                                            [True, True, True]]
    assert out.loss_mask.tolist() == out.completion_mask.tolist()
    assert out.prompt_index.tolist() == [0, 0, 1]
    assert out.finish_reason == ["stop", "length", "stop"]
    assert out.lengths.tolist() == [2, 1, 3]
    torch.testing.assert_close(out.logprobs[2], torch.tensor([-0.1, -0.2, -0.3]))
