"""GRPO learns: the tiny random model, rewarded for a simple verifiable behaviour, raises its
mean reward within a bounded number of steps, and an inverted reward drives it the other way
(so the test cannot pass by a drift that ignores the reward's sign)."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from step_state import step_state  # noqa: E402

from rlvr.models import TINY_RANDOM, load_model_and_tokenizer  # noqa: E402
from rlvr.records import Task  # noqa: E402
from rlvr.rewards.config import RewardConfig  # noqa: E402
from rlvr.rewards.pipeline import RewardPipeline  # noqa: E402
from rlvr.rewards.registry import VERIFIERS, register_verifier  # noqa: E402
from rlvr.rewards.types import Status, Verdict  # noqa: E402
from rlvr.rollout import create_engine  # noqa: E402
from rlvr.tasks.prompting import prompt_ids, stop_token_ids  # noqa: E402
from rlvr.train.config import RunConfig  # noqa: E402
from rlvr.train.grpo import GRPOStep  # noqa: E402

TARGET = "7"

if "test-sevens" not in VERIFIERS:
    @register_verifier("test-sevens", format_rule="none")
    def sevens(completion: str, reference, **options) -> Verdict:
        """Partial credit: the fraction of the first 8 characters that are the target
        character (``reference``), or its complement when ``options['invert']``."""
        head = completion[:8].ljust(8)
        share = sum(ch == reference for ch in head) / 8
        score = 1.0 - share if options.get("invert") else share
        return Verdict(Status.correct if score == 1.0 else Status.wrong, head, "test",
                       score=score)


def _train(invert: bool, steps: int) -> list[float]:
    config = RunConfig.model_validate({
        "seed": 3, "model": {"name": TINY_RANDOM, "precision": "auto"},
        "grpo": {"prompts_per_step": 4, "group_size": 8, "learning_rate": 3e-3,
                 "max_new_tokens": 8, "micro_batch_size": 32, "temperature": 1.0},
        "algo": {"kl_coef": 0.0},
    })
    torch.manual_seed(config.seed)
    policy, tokenizer = load_model_and_tokenizer(TINY_RANDOM, seed=config.seed)
    rewards = RewardPipeline(RewardConfig(workers=0, weights={"outcome": 1.0, "format": 0.0},
                                          verifier_options={"test-sevens": {"invert": invert}}))
    tasks = [Task(id=f"t{i}", prompt=f"say {i}", reference=TARGET, task_type="test-sevens",
                  source="test") for i in range(4)]
    prompts = [prompt_ids(tokenizer, t, "", False) for t in tasks]
    optimizer = torch.optim.AdamW(policy.parameters(), lr=config.grpo.learning_rate)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    engine = create_engine("torch", policy, pad_token_id=tokenizer.pad_token_id)
    state = step_state(config, tasks, prompts, engine, tokenizer, rewards, policy=policy,
                       optimizer=optimizer, scheduler=scheduler,
                       stop_ids=stop_token_ids(tokenizer))
    step = GRPOStep(config)
    # Reward is the share of TARGET among the first 8 characters (inverted: its absence).
    share = []
    for i in range(1, steps + 1):
        batch = step.run(state, i)
        share.append(sum(1 - r.components["outcome"] if invert else r.components["outcome"]
                         for r in batch.results) / len(batch.results))
    return share


def _mean(xs):
    return sum(xs) / len(xs)


def test_grpo_raises_mean_reward_of_a_simple_verifiable_behaviour():
    share = _train(invert=False, steps=25)
    # A random 100-token model writes the target about 1% of the time.
    assert _mean(share[:3]) < 0.1
    assert _mean(share[-3:]) > 0.5, share


def test_inverted_reward_drives_the_behaviour_down():
    up = _train(invert=False, steps=12)
    down = _train(invert=True, steps=12)
    assert up[0] == pytest.approx(down[0])  # same seed, same first rollout
    assert _mean(down[-3:]) < _mean(up[-3:])
    assert _mean(down[-3:]) <= down[0] + 0.02
