"""GRPO steps on multi-turn episodes (a run config's ``env`` section) on the tiny random model:

- ``single_turn`` through the episode path samples the same completions, gets the same rewards
  and takes the same update as the plain single-turn step;
- environment tokens get no gradient: the loss's gradient with respect to the log-probs and the
  entropy of every inserted observation token is exactly zero (policy loss, KL term, entropy
  bonus and TIS all on), and moving the sampler's log-probs of those tokens leaves the update
  bit for bit unchanged;
- the step's episode metrics and samples.jsonl trajectories, worked by hand on a scripted
  engine and environment;
- a bad ``env`` section is a config error naming the field.
"""

import copy
import json
from types import SimpleNamespace

import pytest
import rlvr_multiturn_plugin  # tests/train is on sys.path: test_first_call, test-chars
import torch
from step_state import step_state

import rlvr.update.loop as update_loop
from rlvr.configio import ConfigError, load_config
from rlvr.envs import Environment, make_env, register_env, unregister_env
from rlvr.envs.runner import EpisodeRunner
from rlvr.envs.tokens import observation_ids
from rlvr.models import load_model_and_tokenizer
from rlvr.records import Task
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.types import RewardResult, Status
from rlvr.rollout import RolloutOutput, create_engine
from rlvr.tasks.prompting import chat_messages, prompt_ids, stop_token_ids
from rlvr.tools.types import ToolOutcome, ToolStatus
from rlvr.train.config import RunConfig
from rlvr.train.grpo import GRPOStep
from rlvr.train.hooks import LoggingHook
from rlvr.train.rollouts import EpisodeSource

SCORE_TYPE = rlvr_multiturn_plugin.CHARS
TASKS = [Task(id=f"t{i}", prompt=f"What is {i} + 3?", reference=str(i + 3),
              task_type=SCORE_TYPE, source="test") for i in range(3)]
SETTINGS = {"seed": 5, "model": {"name": "tiny-random", "precision": "fp32"},
            "grpo": {"prompts_per_step": 3, "group_size": 4, "max_new_tokens": 6,
                     "micro_batch_size": 64, "learning_rate": 0.05}}


@pytest.fixture(scope="module")
def tiny():
    return load_model_and_tokenizer("tiny-random", seed=5)


@pytest.fixture(scope="module")
def rewards():
    with RewardPipeline(RewardConfig(workers=0, weights={"outcome": 1.0, "format": 0.0})) as p:
        yield p


def _config(**sections) -> RunConfig:
    data = copy.deepcopy(SETTINGS)
    for name, values in sections.items():
        if isinstance(data.get(name), dict):
            data[name].update(values)
        else:
            data[name] = values
    return RunConfig.model_validate(data)


def _step(tiny, rewards, config: RunConfig, engine=None, tasks=TASKS, prompts=None):
    """The step and its state over ``tasks`` (drawn in order): a copy of the tiny model, its
    engine (or ``engine``), plain prompts; episodes through the config's ``env`` with each
    task's plain chat messages."""
    model, tokenizer = tiny
    policy = copy.deepcopy(model).float()
    reference = (copy.deepcopy(policy).eval().requires_grad_(False)
                 if config.algo.kl_coef > 0 else None)
    optimizer = torch.optim.SGD(policy.parameters(), lr=config.grpo.learning_rate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    engine = engine or create_engine("torch", policy, pad_token_id=tokenizer.pad_token_id)
    prompts = prompts or [prompt_ids(tokenizer, t, "", False) for t in tasks]
    state = step_state(config, tasks, prompts, engine, tokenizer, rewards, policy=policy,
                       reference=reference, optimizer=optimizer, scheduler=scheduler,
                       stop_ids=stop_token_ids(tokenizer))
    if config.env is not None:
        state.source = EpisodeSource(config, EpisodeRunner(
            make_env(config.env, rewards), tokenizer, lambda t: chat_messages(t, "", False)))
    return GRPOStep(config), state


def _weights(state) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in state.models.policy.parameters()])


TIMING = ("seconds_rollout", "seconds_reward", "seconds_update", "tokens_per_second")


def test_single_turn_env_is_the_plain_step(tiny, rewards):
    plain, plain_state = _step(tiny, rewards, _config())
    episodic, episodic_state = _step(tiny, rewards, _config(env={"name": "single_turn"}))
    a, b = plain.run(plain_state, 1), episodic.run(episodic_state, 1)
    assert torch.equal(a.rollout.completion_ids, b.rollout.completion_ids)
    assert torch.equal(b.rollout.loss_mask, b.rollout.completion_mask)
    assert torch.equal(a.rewards, b.rewards) and a.texts == b.texts
    assert len(set(a.rewards.tolist())) > 1  # the rewards differ: the step trains
    torch.testing.assert_close(b.advantages, a.advantages, atol=0, rtol=0)
    plain_metrics = {k: v for k, v in a.metrics.items() if k not in TIMING}
    assert {k: b.metrics[k] for k in plain_metrics} == plain_metrics
    assert b.metrics["episode_turns_mean"] == 1.0 and b.metrics["finish_rate/stop"] + \
        b.metrics["finish_rate/length"] == 1.0
    torch.testing.assert_close(_weights(episodic_state), _weights(plain_state), atol=0, rtol=0)


MULTI = {"env": {"name": "test_first_call", "tools": ["calculator"], "max_turns": 2,
                 "plugins": ["rlvr_multiturn_plugin"]},
         "algo": {"kl_coef": 0.05, "entropy_coef": 0.01, "tis_cap": 2.0}}


def test_environment_tokens_get_no_gradient(tiny, rewards, monkeypatch):
    step, state = _step(tiny, rewards, _config(**MULTI))
    seen = []
    real = update_loop.completion_log_probs

    def recording(*args, **kwargs):
        logp, entropy = real(*args, **kwargs)
        logp.retain_grad()
        entropy.retain_grad()
        seen.append((logp, entropy))
        return logp, entropy

    monkeypatch.setattr(update_loop, "completion_log_probs", recording)
    batch = step.run(state, 1)
    train = batch.train
    assert train is not None and len(seen) == 1  # one micro-batch: every train row
    logp, entropy = seen[0]
    width = logp.shape[1]
    sampled = train.sequences.loss_mask[:, :width]
    inserted = train.sequences.completion_mask[:, :width] & ~sampled
    assert bool(inserted.any(dim=1).all())  # an observation in every trained row
    assert torch.count_nonzero(logp.grad[inserted]) == 0
    assert torch.count_nonzero(entropy.grad[inserted]) == 0
    assert torch.count_nonzero(logp.grad[sampled]) > sampled.sum() // 2
    assert batch.metrics["episode_turns_mean"] == 2.0  # the scripted first call, then one more


def test_observation_sampler_log_probs_do_not_change_the_update(tiny, rewards):
    step, state = _step(tiny, rewards, _config(**MULTI))
    policy = state.models.policy
    before = copy.deepcopy(policy.state_dict())
    batch = step.run(state, 1)
    after = _weights(state)
    train = batch.train
    inserted = train.sequences.completion_mask & ~train.sequences.loss_mask
    # the same update again from the same weights, with the observation tokens' sampler
    # log-probs moved far (they enter only through TIS and the rollout gap, both masked)
    policy.load_state_dict(before)
    moved = copy.copy(train)
    moved.sampler_log_probs = train.sampler_log_probs.where(~inserted, torch.tensor(-7.0))
    moved.old_log_probs = moved.ref_log_probs = None
    metrics = step.update(state, moved)
    torch.testing.assert_close(_weights(state), after, atol=0, rtol=0)
    assert metrics["rollout_logprob_gap"] == pytest.approx(batch.metrics["rollout_logprob_gap"],
                                                           abs=0)


# -- metrics and samples on a scripted engine and environment ---------------------------------

TURN = [7, 8]  # every turn samples these ids, then the end-of-turn id


class ScriptedEngine:
    """Samples ``TURN + [stop]`` for every row, log-prob -0.5 per token."""

    def __init__(self, pad, stop):
        self.pad_token_id, self.stop = pad, stop

    def update_weights(self, model):
        pass

    def generate(self, prompts, params):
        rows = len(prompts) * params.n
        ids = torch.tensor([TURN + [self.stop]] * rows)
        mask = torch.ones_like(ids, dtype=torch.bool)
        return RolloutOutput(ids, mask, torch.full(ids.shape, -0.5),
                             torch.arange(rows) // params.n, ["stop"] * rows,
                             mask.sum(1), pad_token_id=self.pad_token_id)


class ScriptedCalls(Environment):
    """Tasks whose prompt says "call" ask for one tool call on their first turn; the calls'
    outcomes alternate ok / error, 0.25 s each."""

    name = "test_scripted_calls"

    def __init__(self, config, rewards):
        super().__init__(config, rewards)
        self.calls = 0

    def parse_action(self, episode, text):
        return "call" if "call" in episode.task.prompt and episode.turns == 1 else None

    def respond(self, episodes, actions):
        replies = []
        for episode in episodes:
            status = ToolStatus.ok if self.calls % 2 == 0 else ToolStatus.error
            self.calls += 1
            episode.tool_calls.append(ToolOutcome("calculator", status, f"obs {self.calls}",
                                                  0.25))
            replies.append({"role": "tool", "content": f"obs {self.calls}"})
        return replies


class FixedRewards:
    """Reward 1.0 (correct) for reference "5", 0.25 (wrong) otherwise."""

    def score_batch(self, requests):
        return [RewardResult(1.0 if r.reference == "5" else 0.25,
                             {"outcome": 1.0 if r.reference == "5" else 0.25, "format": 1.0},
                             Status.correct if r.reference == "5" else Status.wrong, "x")
                for r in requests]


@pytest.fixture
def scripted_env():
    register_env(ScriptedCalls)
    yield
    unregister_env(ScriptedCalls.name)


def test_episode_metrics_and_samples_by_hand(tiny, scripted_env, tmp_path):
    model, tokenizer = tiny
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = _config(env={"name": "test_scripted_calls", "max_turns": 3},
                     grpo={"prompts_per_step": 2, "group_size": 2})
    tasks = [Task(id="a", prompt="call: 2 + 3", reference="5", task_type="math", source="t"),
             Task(id="b", prompt="plain", reference="9", task_type="math", source="t")]
    step, state = _step(tiny, FixedRewards(), config,
                        engine=ScriptedEngine(tokenizer.pad_token_id, stop), tasks=tasks,
                        prompts=[[1]] * 2)
    batch = step.run(state, 1)
    m = batch.metrics
    # task a: turn, observation, turn (2 turns, 1 call); task b: one turn; all end with "stop"
    assert m["episode_turns_mean"] == (2 + 2 + 1 + 1) / 4
    assert m["episode_tool_calls_mean"] == 2 / 4
    assert m["tool_error_rate"] == 1 / 2 and m["tool_seconds"] == 0.5
    assert m["finish_rate/stop"] == 1.0
    assert all(m[f"finish_rate/{r}"] == 0.0
               for r in ("length", "max_turns", "max_tokens", "tool_timeout"))
    assert (m["episodes_tool_use"], m["episodes_no_tool_use"]) == (2.0, 2.0)
    assert (m["reward_mean_tool_use"], m["reward_mean_no_tool_use"]) == (1.0, 0.25)
    assert m["reward_mean"] == (1.0 + 1.0 + 0.25 + 0.25) / 4
    # lengths count sampled tokens only: 2 turns of 3 ids, or 1
    assert (m["length_mean"], m["length_max"]) == ((6 + 6 + 3 + 3) / 4, 6.0)
    assert m["rollout_entropy"] == 0.5  # -mean sampled log-prob; observations not sampled
    episode = batch.episodes.episodes[0]
    obs = observation_ids(tokenizer, episode.messages[:episode.initial + 1],
                          episode.messages[episode.initial + 1], stop)
    out = batch.rollout
    assert out.completion_ids[0, :6 + len(obs)].tolist() == TURN + [stop] + obs + TURN + [stop]
    assert out.loss_mask[0].tolist() == [True] * 3 + [False] * len(obs) + [True] * 3

    turn = tokenizer.decode(TURN + [stop], skip_special_tokens=True)
    assert batch.scored_texts == [turn] * 4  # what the verdicts (and the audit) judged
    hook = LoggingHook(config, tmp_path, SimpleNamespace(sinks=SimpleNamespace(
        log=lambda *a: None)))
    hook.log_step(1, m, batch)
    rows = [json.loads(x) for x in (tmp_path / "samples.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "a", "b", "b"]
    assert rows[1]["trajectory"] == [
        {"role": "assistant", "text": turn, "trained": True, "tokens": 3},
        {"role": "tool", "text": "obs 2", "trained": False, "tokens": len(obs)},
        {"role": "assistant", "text": turn, "trained": True, "tokens": 3}]
    assert (rows[1]["turns"], rows[1]["tool_calls"], rows[1]["tool_errors"],
            rows[1]["finish_reason"]) == (2, 1, 1, "stop")
    assert rows[2]["trajectory"] == [{"role": "assistant", "text": turn, "trained": True,
                                      "tokens": 3}]
    assert rows[2]["tool_calls"] == 0 and rows[2]["completion"] == turn


# -- config -----------------------------------------------------------------------------------

@pytest.mark.parametrize("override, field", [
    ("env.name=tol", "env.name: unknown environment 'tol'; did you mean 'tool'?"),
    ("env.tools=[calculater]", "env.tools: unknown tool 'calculater'; did you mean "
                               "'calculator'?"),
    ("env.max_turn=3", "env.max_turn: unknown key; did you mean 'max_turns'?"),
])
def test_a_bad_env_section_names_the_field(override, field):
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, None, [override])
    assert field in str(info.value)


def test_no_env_section_is_single_turn():
    assert RunConfig().env is None
    config = load_config(RunConfig, None, ["env.name=tool"])
    assert config.env.tools == ["calculator", "python"]
