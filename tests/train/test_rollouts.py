"""The synchronous rollout sources (src/rlvr/train/rollouts.py): a source draws its tasks from
the run's sampler, samples them with the step's seed and tags every row with the policy
version that sampled it (the number of updates applied: ``state.progress.step``);
``ScoredRollouts.concat`` joins rounds with the tasks numbered on."""

import torch
from step_state import ScriptedEngine, step_state

from rlvr.configio import load_config
from rlvr.records import Task
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.types import Status
from rlvr.rollout.types import RolloutOutput
from rlvr.train.config import RunConfig
from rlvr.train.rollouts import EpisodeSource, ScoredRollouts, SingleTurnSource, rollout_source

TEXTS = {5: "2 + 2 = 4\n#### 4", 6: "2 + 2 = 5\n#### 5"}


class _Tokenizer:
    pad_token_id = 0

    def decode(self, ids, skip_special_tokens=True):
        return TEXTS[ids[0]]


def _output(prompts, params):
    """Per prompt: G = 2 completions, the right answer then a wrong one."""
    n = len(prompts) * params.n
    ids = torch.tensor([[5 if r % 2 == 0 else 6, 99] for r in range(n)])
    return RolloutOutput(completion_ids=ids, completion_mask=torch.ones_like(ids).bool(),
                         logprobs=torch.full(ids.shape, -0.5),
                         prompt_index=torch.arange(n) // params.n,
                         finish_reason=["stop"] * n, lengths=torch.full((n,), 2))


def _state():
    config = load_config(RunConfig, None, ["grpo.group_size=2", "reward.workers=0", "seed=4"])
    tasks = [Task(id=f"t{i}", prompt="2 + 2?", reference="4", task_type="math", source="test")
             for i in range(5)]
    engine = ScriptedEngine(_output)
    state = step_state(config, tasks, [[i + 10] for i in range(5)], engine, _Tokenizer(),
                       RewardPipeline(config.reward))
    return config, state, engine


def test_a_source_draws_samples_scores_and_tags_the_policy_version():
    config, state, engine = _state()
    assert isinstance(state.source, SingleTurnSource)  # no env section: single-turn
    state.progress.step = 3  # three updates applied to the weights that sample now
    scored = state.source.collect(state, step=4, groups=2)
    assert scored.task_indices == [0, 1] and [t.id for t in scored.tasks] == ["t0", "t1"]
    assert scored.prompts == [[10], [10], [11], [11]]  # each row's prompt, row order
    assert engine.params[0].seed == 4 * 1_000_003 + 4 and engine.params[0].n == 2
    assert scored.texts == [TEXTS[5], TEXTS[6]] * 2
    assert [r.status for r in scored.results] == [Status.correct, Status.wrong] * 2
    assert scored.versions.tolist() == [3, 3, 3, 3]
    assert scored.episodes is None


def test_concat_numbers_the_rounds_tasks_on():
    config, state, engine = _state()
    first = state.source.collect(state, step=1, groups=2)
    state.progress.step = 1  # (as if) an update came between the rounds
    second = state.source.collect(state, step=1, groups=1, round_=1)
    assert engine.params[1].seed == engine.params[0].seed + 2 ** 40  # a round's own seed
    both = ScoredRollouts.concat([first, second])
    assert both.task_indices == [0, 1, 2]
    assert both.output.prompt_index.tolist() == [0, 0, 1, 1, 2, 2]
    assert both.prompts == [[10], [10], [11], [11], [12], [12]]
    assert both.versions.tolist() == [0, 0, 0, 0, 1, 1]
    assert len(both.results) == 6 and both.texts[4:] == [TEXTS[5], TEXTS[6]]
    assert ScoredRollouts.concat([first]) is first


def test_an_env_section_makes_an_episode_source():
    config = load_config(RunConfig, None, ["env.name=single_turn", "reward.workers=0"])
    state = step_state(config, [], [], None, _Tokenizer(), RewardPipeline(config.reward))
    source = rollout_source(state, config, RewardPipeline(config.reward))
    assert isinstance(source, EpisodeSource)
    assert source.length_cap(64) == 64  # single_turn: one turn of max_new_tokens
