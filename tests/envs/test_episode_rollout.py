"""Multi-turn episode rollouts on the tiny random model (fp32) through the torch and hf engines:
the episode's ids are prompt + sampled + inserted observation ids in order, the loss mask is the
sampled ids, the recorded log-probs equal a full re-forward of the episode, and the limits end
episodes with their finish reason."""

import pytest
import torch
from rollout.test_vllm_engine import FakeLLM, fake_sp  # tests/ is on sys.path (its conftest)

from rlvr.algo.advantages import DEFAULT_EPS, grpo_advantages
from rlvr.envs import EnvConfig, Environment, FinishReason, register_env, unregister_env
from rlvr.envs.episodes import EpisodeBook, rollout_episodes
from rlvr.envs.summary import trajectory
from rlvr.envs.tokens import observation_ids
from rlvr.models import load_model_and_tokenizer
from rlvr.models.tiny import spread_weights
from rlvr.records import Task
from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.types import RewardResult
from rlvr.rollout import SamplingParams, create_engine
from rlvr.rollout.vllm_engine import VLLMEngine

TASKS = [Task(id=f"t{i}", prompt=p, reference="7", task_type="math", source="test")
         for i, p in enumerate(["What is 3 + 4?", "Say 7."])]
OBS = "observation: 7"


class EchoEnv(Environment):
    """Every turn that ended with its stop token asks for more; the answer is one user message."""

    name = "echo_test"

    def parse_action(self, episode, text):
        return text

    def respond(self, episodes, actions):
        return [{"role": "user", "content": OBS} for _ in episodes]


@pytest.fixture(scope="module", autouse=True)
def _registered():
    register_env(EchoEnv)
    yield
    unregister_env(EchoEnv.name)


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = load_model_and_tokenizer("tiny-random")
    return spread_weights(model).float().eval(), tokenizer


@pytest.fixture(scope="module")
def pipeline():
    with RewardPipeline(RewardConfig(workers=0)) as p:
        yield p


def _prompts(tokenizer):
    texts = [tokenizer.apply_chat_template([{"role": "user", "content": t.prompt}],
                                           tokenize=False, add_generation_prompt=True)
             for t in TASKS]
    return [tokenizer(t, add_special_tokens=False).input_ids for t in texts]


def _run(tiny, pipeline, engine_name, max_turns=3, budget=None, max_new=6, seed=0):
    model, tokenizer = tiny
    env = EchoEnv(EnvConfig(name="echo_test", max_turns=max_turns, max_episode_tokens=budget),
                  pipeline)
    # a random model rarely samples <|im_end|>: half the vocabulary also ends a turn, so
    # episodes run several turns (a stop id the template does not close with is kept)
    stop = (tokenizer.convert_tokens_to_ids("<|im_end|>"), *range(40, 90))
    params = SamplingParams(temperature=1.0, max_new_tokens=max_new, stop_token_ids=stop,
                            n=2, seed=seed)
    engine = create_engine(engine_name.removesuffix("-rounds"), model,
                           precision="fp32")  # fp32 on every CPU
    if engine_name.endswith("-rounds"):
        engine = RoundsOnly(engine)
    return rollout_episodes(engine, env, tokenizer, TASKS, _prompts(tokenizer), params), stop


class RoundsOnly:
    """An engine seen through ``generate`` only: episodes play in turn-synchronous rounds
    (:func:`rlvr.envs.episodes.play_rounds`), not in the torch engine's continuous loop."""

    def __init__(self, engine):
        self.engine, self.pad_token_id = engine, engine.pad_token_id

    def generate(self, prompts, params):
        return self.engine.generate(prompts, params)


ENGINES = ["torch", "torch-rounds", "hf"]


def _spans(mask_row):
    """(start, end, is_sampled) runs of a 1-D bool list."""
    runs, start = [], 0
    for t in range(1, len(mask_row) + 1):
        if t == len(mask_row) or mask_row[t] != mask_row[start]:
            runs.append((start, t, mask_row[start]))
            start = t
    return runs


@pytest.mark.parametrize("engine_name", ENGINES)
def test_ids_are_sampled_plus_observation_ids_in_order(tiny, pipeline, engine_name):
    _, tokenizer = tiny
    result, stop = _run(tiny, pipeline, engine_name)
    out = result.output
    assert out.num_rows == 4 and out.prompt_index.tolist() == [0, 0, 1, 1]
    for r, episode in enumerate(result.episodes):
        k = int(out.lengths[r])
        ids = out.completion_ids[r, :k].tolist()
        loss = out.loss_mask[r, :k].tolist()
        runs = _spans(loss)
        assert runs[0][2] and runs[-1][2]  # starts and ends with a sampled turn
        turns = [ids[a:b] for a, b, s in runs if s]
        inserted = [ids[a:b] for a, b, s in runs if not s]
        assert len(turns) == episode.turns and len(inserted) == episode.turns - 1
        messages = episode.messages
        for j, observation in enumerate(inserted):
            # independently: the template's ids for the j-th observation after the j-th turn
            upto = messages[: episode.initial + 2 * j + 1]
            assert upto[-1]["content"] == tokenizer.decode(turns[j], skip_special_tokens=True)
            sampled_stop = turns[j][-1] if turns[j][-1] in stop else None
            assert observation == observation_ids(tokenizer, upto, messages[len(upto)],
                                                  sampled_stop)
        assert episode.tokens == k
        assert not out.logprobs[r, :k][~out.loss_mask[r, :k]].any()
    assert max(e.turns for e in result.episodes) >= 2


@pytest.mark.parametrize("engine_name", ENGINES)
def test_logprobs_equal_a_full_reforward(tiny, pipeline, engine_name):
    model, _ = tiny
    result, _ = _run(tiny, pipeline, engine_name)
    out = result.output
    for r, prompt in enumerate(result.prompts):
        k = int(out.lengths[r])
        ids = torch.tensor([prompt + out.completion_ids[r, :k].tolist()])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1: -1].float()
        want = torch.log_softmax(logits, -1).gather(1, ids[0, len(prompt):, None])[:, 0]
        mask = out.loss_mask[r, :k]
        torch.testing.assert_close(out.logprobs[r, :k][mask], want[mask], atol=2e-4, rtol=0)


@pytest.mark.parametrize("engine_name", ["torch", "torch-rounds"])
def test_max_turns_ends_episodes(tiny, pipeline, engine_name):
    result, _ = _run(tiny, pipeline, engine_name, max_turns=1, max_new=40)
    for e in result.episodes:
        assert e.turns == 1
        assert e.finish_reason in (FinishReason.max_turns, FinishReason.length)
    assert result.output.finish_reason == [str(e.finish_reason) for e in result.episodes]
    assert "max_turns" in result.output.finish_reason


@pytest.mark.parametrize("engine_name", ["torch", "torch-rounds"])
def test_episode_token_budget_ends_with_max_tokens(tiny, pipeline, engine_name):
    result, _ = _run(tiny, pipeline, engine_name, max_turns=50, budget=12, max_new=5)
    assert result.output.finish_reason == [str(e.finish_reason) for e in result.episodes]
    for r, e in enumerate(result.episodes):
        assert e.finish_reason in (FinishReason.max_tokens, FinishReason.length)
        # the whole episode, sampled and inserted ids, stays within the budget
        assert int(result.output.completion_mask[r].sum()) <= 12
    assert any(e.finish_reason == FinishReason.max_tokens for e in result.episodes)
    # an observation (~10 ids here) that would leave no room for another turn is not inserted
    dropped = [r for r, e in enumerate(result.episodes) if e.dropped_observation]
    assert dropped
    for r in dropped:
        e = result.episodes[r]
        assert e.finish_reason == FinishReason.max_tokens
        assert not bool(result.output.completion_mask[r][int(result.output.lengths[r]):].any())
        segments = trajectory(e, result.output.loss_mask[r][:int(result.output.lengths[r])])
        assert segments[-1] == {"role": "user", "text": OBS, "trained": False,
                                "inserted": False}
        assert sum(s.get("tokens", 0) for s in segments) == int(result.output.lengths[r])


def test_vllm_engine_fakes_give_the_same_structure(tiny, pipeline):
    """Through the vllm engine's protocol (prompt token ids) on its stand-in LLM, whose turn after
    ids ending in x is [x+1, x+2, x+3] % 50 with log-probs -(t + 1) / 10, "stop" but no stop id:
    the episode is computable by hand."""
    model, tokenizer = tiny
    env = EchoEnv(EnvConfig(name="echo_test", max_turns=3), pipeline)
    engine = VLLMEngine(model, llm=FakeLLM(stop_at=3), sampling_params_cls=fake_sp)
    prompts = _prompts(tokenizer)
    params = SamplingParams(temperature=1.0, max_new_tokens=8, n=2, seed=0)
    result = rollout_episodes(engine, env, tokenizer, TASKS, prompts, params)
    out = result.output
    assert out.finish_reason == ["max_turns"] * 4 and out.prompt_index.tolist() == [0, 0, 1, 1]
    for r, episode in enumerate(result.episodes):
        ids, mask, lps, messages = [], [], [], episode.messages
        last = prompts[r // 2][-1]
        for j in range(3):
            turn = [(last + k) % 50 for k in (1, 2, 3)]
            ids += turn
            mask += [True] * 3
            lps += [-(t + 1) / 10 for t in turn]
            if j < 2:
                upto = messages[: episode.initial + 2 * j + 1]
                obs = observation_ids(tokenizer, upto, {"role": "user", "content": OBS})
                ids += obs
                mask += [False] * len(obs)
                lps += [0.0] * len(obs)
                last = obs[-1]
        k = int(out.lengths[r])
        assert out.completion_ids[r, :k].tolist() == ids
        assert out.loss_mask[r, :k].tolist() == mask
        torch.testing.assert_close(out.logprobs[r, :k], torch.tensor(lps))
        assert episode.turns == 3


class ChecksumRewards:
    """A reward pipeline stand-in: the reward of an episode is a checksum of its last turn, so
    the G episodes of a task differ."""

    def score_batch(self, requests):
        return [RewardResult(float(sum(map(ord, r.completion)) % 97)) for r in requests]


def test_advantages_are_per_episode_over_the_g_episodes_of_a_task(tiny):
    result, _ = _run(tiny, ChecksumRewards(), "hf", max_new=12)
    rewards = result.rewards
    assert rewards.tolist() == [e.reward.reward for e in result.episodes]
    adv = grpo_advantages(rewards, result.output.prompt_index)
    for task in range(2):
        group = rewards[2 * task: 2 * task + 2].double()
        assert group[0] != group[1]
        std = float(group.std())
        want = [(float(x) - float(group.mean())) / (std + DEFAULT_EPS) for x in group]
        torch.testing.assert_close(adv[2 * task: 2 * task + 2].double(),
                                   torch.tensor(want, dtype=torch.float64), atol=1e-5, rtol=0)


@pytest.mark.parametrize("shared_prefix", [True, False])
def test_continuous_loop_equals_rounds_when_greedy(tiny, pipeline, monkeypatch, shared_prefix):
    """Greedy, the torch engine's one decode loop (the cache continues across turns, inserted ids
    are fed step by step, the cache starts 2 columns wide and grows) plays the same episodes as
    rounds that re-prefill every episode through ``generate``: same ids, masks, finish reasons,
    log-probs within fp32 rounding. Even ids end a turn, so turns are short and numerous."""
    model, tokenizer = tiny
    monkeypatch.setattr(EpisodeBook, "capacity_hint", lambda self: 2)
    stop = tuple(range(0, tokenizer.vocab_size, 2))
    params = SamplingParams(temperature=0.0, max_new_tokens=4, stop_token_ids=stop, n=2)
    results = []
    for rounds in (False, True):
        env = EchoEnv(EnvConfig(name="echo_test", max_turns=4), pipeline)
        engine = create_engine("torch", model, precision="fp32", shared_prefix=shared_prefix)
        engine = RoundsOnly(engine) if rounds else engine
        results.append(rollout_episodes(engine, env, tokenizer, TASKS, _prompts(tokenizer),
                                        params))
    loop, rounds = (r.output for r in results)
    assert max(e.turns for e in results[0].episodes) >= 3
    assert torch.equal(loop.completion_ids, rounds.completion_ids)
    assert torch.equal(loop.loss_mask, rounds.loss_mask)
    assert loop.finish_reason == rounds.finish_reason
    torch.testing.assert_close(loop.logprobs, rounds.logprobs, atol=1e-4, rtol=0)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cache_growth_changes_nothing(tiny, pipeline, monkeypatch, precision):
    """The same sampled episodes whether the loop's cache starts 2 columns wide and doubles
    (bf16: whole key blocks and value pairs of the kernel's layouts) or starts wide enough."""
    outputs = []
    for hint in (2, 4096):
        monkeypatch.setattr(EpisodeBook, "capacity_hint", lambda self, h=hint: h)
        model, tokenizer = tiny
        env = EchoEnv(EnvConfig(name="echo_test", max_turns=4), pipeline)
        stop = (tokenizer.convert_tokens_to_ids("<|im_end|>"), *range(40, 90))
        params = SamplingParams(temperature=1.0, max_new_tokens=6, stop_token_ids=stop, n=2,
                                seed=3)
        engine = create_engine("torch", model, precision=precision)
        outputs.append(rollout_episodes(engine, env, tokenizer, TASKS, _prompts(tokenizer),
                                        params).output)
    grown, wide = outputs
    assert int(grown.lengths.max()) > 8  # past several doublings
    assert torch.equal(grown.completion_ids, wide.completion_ids)
    assert torch.equal(grown.logprobs, wide.logprobs)
