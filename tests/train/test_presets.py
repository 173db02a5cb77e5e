"""The shipped presets (configs/*.yaml) load and validate as `rlvr train --config` reads them;
the reasoning-gym preset's data is what its header says (no model is trained here)."""

from collections import Counter
from pathlib import Path

import pytest

from rlvr.configio import load_config
from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import ScoreRequest
from rlvr.train.config import RunConfig
from rlvr.train.taskdata import load_run_data

ROOT = Path(__file__).resolve().parents[2]
PRESETS = sorted((ROOT / "configs").glob("*.yaml"))
GYM = ROOT / "configs" / "reasoning_gym.yaml"


def test_the_gym_preset_is_among_the_presets():
    assert GYM in PRESETS


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: p.stem)
def test_every_preset_loads_and_validates(path):
    if "source: reasoning_gym" in path.read_text():
        pytest.importorskip("reasoning_gym")  # its mixture is checked against the library
    config = load_config(RunConfig, path)
    assert config.name == path.stem


def _smollm2_tokenizer():
    try:
        from transformers import AutoTokenizer

        from rlvr.models.loader import resolve_model_path
        return AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))
    except Exception as exc:  # the default model is not available here
        pytest.skip(f"default model tokenizer unavailable: {exc}")


@pytest.fixture(scope="module")
def gym_run():
    """The gym preset's config and its run data, loaded as `rlvr train` loads them."""
    pytest.importorskip("reasoning_gym")
    config = load_config(RunConfig, GYM)
    rewards = RewardPipeline(RewardConfig(**{**config.reward.model_dump(), "workers": 0}))
    return config, load_run_data(config, rewards, log=lambda line: None), rewards


def test_gym_preset_data_three_datasets_disjoint_splits(gym_run):
    config, data, _ = gym_run
    assert (len(data.train_tasks), len(data.val_tasks)) == (2000, 200)
    datasets = {"chain_sum", "products", "word_sequence_reversal"}
    for tasks in (data.train_tasks, data.val_tasks):
        counts = Counter(t.category for t in tasks)
        assert set(counts) == datasets
        assert min(counts.values()) >= len(tasks) / 5  # equal weights: ~a third each
    assert not {t.prompt for t in data.train_tasks} & {t.prompt for t in data.val_tasks}
    assert data.instruction(data.val_tasks[0]) == config.data.instruction


def test_gym_preset_sft_examples_verify_and_fit_the_token_caps(gym_run):
    config, data, rewards = gym_run
    pool = data.train_tasks[:config.sft.examples]  # what the cold start trains on
    assert {t.category for t in pool} == {"chain_sum", "products", "word_sequence_reversal"}
    results = rewards.score_batch([ScoreRequest(t.solution, t.reference, t.task_type)
                                   for t in pool])
    assert [r.status.value for r in results] == ["correct"] * len(pool)
    tokenizer = _smollm2_tokenizer()
    from rlvr.tasks.prompting import prompt_ids

    for t in pool + data.val_tasks:
        answer = len(tokenizer(t.solution, add_special_tokens=False).input_ids) + 1  # + end
        prompt = len(prompt_ids(tokenizer, t, data.instruction(t), config.data.one_shot))
        assert answer <= config.grpo.max_new_tokens <= config.eval.max_new_tokens, t.solution
        assert prompt + answer <= config.sft.max_length, t.prompt


def test_gym_preset_pays_no_partial_credit_for_an_answer_that_contains_the_right_one():
    pytest.importorskip("reasoning_gym")
    from rlvr.tasks.gym import generate_gym

    config = load_config(RunConfig, GYM)
    task = generate_gym("chain_sum(min_terms=2, max_terms=2, min_digits=1, max_digits=2)", 1,
                        seed=0)[0]
    answer = task.reference["entry"]["answer"]
    request = ScoreRequest(f"<answer>{answer}1</answer>", task.reference, task.task_type)
    # reasoning-gym's own score_answer gives a wrong answer that contains the right one
    # partial credit (len(answer) / len(given)); the library default keeps it ...
    lenient = RewardPipeline(RewardConfig(workers=0)).score_batch([request])[0]
    assert lenient.status.value == "wrong"
    assert lenient.components["outcome"] == pytest.approx(len(answer) / (len(answer) + 1))
    # ... the preset does not: a wrong answer's outcome is 0
    preset = RewardPipeline(RewardConfig(**{**config.reward.model_dump(), "workers": 0}))
    strict = preset.score_batch([request])[0]
    assert strict.status.value == "wrong" and strict.components["outcome"] == 0.0
