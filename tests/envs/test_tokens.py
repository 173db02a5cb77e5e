"""Observation tokens: the ids the chat template inserts for an observation and the next
assistant header, checked against the template itself, with the repo's tiny tokenizer and the
default model's (SmolLM2-135M-Instruct) tokenizer."""

import pytest

from rlvr.envs import (
    ChatTemplateError,
    EnvConfig,
    Turn,
    make_env,
    observation_ids,
    observation_text,
)
from rlvr.models.tiny import tiny_tokenizer
from rlvr.records import Task
from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig

USER = {"role": "user", "content": "What is 1234 * 5678?"}
CALL = {"role": "assistant", "content": "<calculator>1234 * 5678</calculator>"}
OBS = {"role": "tool", "content": "7006652"}


def _smollm2():
    try:
        from transformers import AutoTokenizer  # optional dependency: transformers (extra `train`)

        from rlvr.models.loader import resolve_model_path
        return AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))
    except Exception as exc:  # the default model is not available offline here
        pytest.skip(f"default model tokenizer unavailable: {exc}")


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def tokenizer(request):
    return tiny_tokenizer() if request.param == "tiny" else _smollm2()


def ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False).input_ids


def render(tokenizer, messages, generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False,
                                         add_generation_prompt=generation_prompt)


def end_of_turn(tokenizer) -> int:
    return tokenizer.convert_tokens_to_ids("<|im_end|>")


def test_the_inserted_text(tokenizer):
    # Both templates close a turn with "<|im_end|>\n": the model sampled "<|im_end|>", so the
    # "\n", the observation's turn and the next assistant header are inserted.
    text = observation_text(tokenizer, [USER, CALL], OBS, end_of_turn(tokenizer))
    assert text == "\n<|im_start|>tool\n7006652<|im_end|>\n<|im_start|>assistant\n"
    # a turn that did not end with the stop token gets the whole closing inserted
    assert observation_text(tokenizer, [USER, CALL], OBS) == "<|im_end|>" + text
    user = observation_text(tokenizer, [USER, CALL], {"role": "user", "content": "go on"},
                            end_of_turn(tokenizer))
    assert user == "\n<|im_start|>user\ngo on<|im_end|>\n<|im_start|>assistant\n"


def test_ids_equal_the_templates_difference(tokenizer):
    stop = end_of_turn(tokenizer)
    prompt = ids(tokenizer, render(tokenizer, [USER], True))
    sampled = ids(tokenizer, CALL["content"]) + [stop]
    inserted = observation_ids(tokenizer, [USER, CALL], [OBS], stop)
    assert inserted == ids(tokenizer, observation_text(tokenizer, [USER, CALL], [OBS], stop))
    assert prompt + sampled + inserted == ids(tokenizer, render(tokenizer, [USER, CALL, OBS],
                                                                True))


def test_several_new_messages(tokenizer):
    stop = end_of_turn(tokenizer)
    two = [OBS, {"role": "user", "content": "and now?"}]
    prompt = ids(tokenizer, render(tokenizer, [USER], True))
    sampled = ids(tokenizer, CALL["content"]) + [stop]
    assert prompt + sampled + observation_ids(tokenizer, [USER, CALL], two, stop) == ids(
        tokenizer, render(tokenizer, [USER, CALL, *two], True))


def test_a_whole_episode_is_sampled_plus_inserted_ids_in_order(tokenizer):
    """A tool episode driven the way an engine drives it: prompt ids from the episode's
    messages, each turn's sampled ids appended as sampled, each observation's ids as
    inserted; the result is the template's tokenisation of the whole conversation."""
    task = Task(id="m", prompt=USER["content"], reference="7006652", task_type="math",
                source="t")
    turns = ["<calculator>1234 * 5678</calculator>",
             "Check: <python>print(1234 * 5678)</python>",
             "1234 * 5678 = 7006652\n#### 7006652"]
    stop = end_of_turn(tokenizer)
    with RewardPipeline(RewardConfig(workers=0)) as rewards:
        env = make_env(EnvConfig(name="tool", max_episode_tokens=4096), rewards)
        episode = env.start(task)
        sequence = ids(tokenizer, render(tokenizer, episode.messages, True))
        prompt_length, sampled_mask = len(sequence), []
        for text in turns:
            sampled = ids(tokenizer, text) + [stop]
            result = env.step(episode, Turn(text, len(sampled)))
            sequence += sampled
            sampled_mask += [True] * len(sampled)
            if not result.done:
                inserted = observation_ids(tokenizer, episode.messages[:-1],
                                           episode.messages[-1:], stop)
                episode.add_inserted(len(inserted))
                sequence += inserted
                sampled_mask += [False] * len(inserted)
    assert [m["content"] for m in episode.messages if m["role"] == "tool"] == ["7006652"] * 2
    assert episode.reward.status.value == "correct"
    whole = ids(tokenizer, render(tokenizer, episode.messages, False))
    # the template closes the last turn with "<|im_end|>\n"; the episode ends at the sampled
    # "<|im_end|>"
    assert whole == sequence + ids(tokenizer, "\n")
    assert episode.tokens == len(sequence) - prompt_length == len(sampled_mask)
    assert sum(sampled_mask) == sum(len(ids(tokenizer, t)) + 1 for t in turns)


def test_sampled_ids_are_never_retokenised():
    """The inserted ids depend only on the text: a turn sampled as other ids than its
    canonical tokenisation (here one id per character) keeps its ids, and the sequence still
    decodes to the template's text."""
    tokenizer = _smollm2()
    stop = end_of_turn(tokenizer)
    content = CALL["content"]
    by_char = [i for ch in content for i in ids(tokenizer, ch)] + [stop]
    assert by_char != ids(tokenizer, content) + [stop]
    prompt = ids(tokenizer, render(tokenizer, [USER], True))
    sequence = prompt + by_char + observation_ids(tokenizer, [USER, CALL], OBS, stop)
    assert tokenizer.decode(sequence) == render(tokenizer, [USER, CALL, OBS], True)


def test_templates_that_are_not_append_only_are_refused():
    tokenizer = tiny_tokenizer()
    trimming = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content | trim }}"
                "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
                "{% endif %}")
    tokenizer.chat_template = trimming
    with pytest.raises(ChatTemplateError, match="generation prompt followed by its content"):
        observation_text(tokenizer, [USER, {"role": "assistant", "content": "x \n"}], OBS)
    hiding = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{% if m.role == 'assistant' and "
              "not loop.last %}[earlier turn]{% else %}{{ m.content }}{% endif %}<|im_end|>\n"
              "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    tokenizer.chat_template = hiding
    with pytest.raises(ChatTemplateError, match="renders earlier turns differently"):
        observation_text(tokenizer, [USER, CALL], OBS)


def test_bad_arguments():
    tokenizer = tiny_tokenizer()
    with pytest.raises(ValueError, match="must end with the assistant turn"):
        observation_text(tokenizer, [USER], OBS)
    with pytest.raises(ValueError, match="no message to insert"):
        observation_text(tokenizer, [USER, CALL], [])
