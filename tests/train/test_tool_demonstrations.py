"""Tool-use SFT demonstrations: their tool outputs are the calculator's, only those
whose answer verifies are kept, their tokens are the episode's (prompt, sampled turns, the ids
the environment inserts), and the SFT loss has zero gradient on everything but the assistant
tokens."""

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from rlvr.envs import EnvConfig, make_env, observation_ids
from rlvr.models import load_model_and_tokenizer
from rlvr.models.tiny import spread_weights
from rlvr.rewards import RewardPipeline
from rlvr.rewards.config import RewardConfig
from rlvr.tasks.prompting import chat_messages
from rlvr.tasks.tool_arithmetic import generate
from rlvr.tools.calculator import calculator
from rlvr.train.demonstrations import (
    DemonstrationError,
    encode_demonstration,
    encode_demonstrations,
    tool_demonstrations,
)
from rlvr.train.sections import SFTConfig
from rlvr.train.sft import _step, run_sft

INSTRUCTION = "Answer as '#### <answer>'."


@pytest.fixture(scope="module")
def tiny():
    model, tokenizer = load_model_and_tokenizer("tiny-random")
    return spread_weights(model).float(), tokenizer


@pytest.fixture(scope="module")
def pipeline():
    config = RewardConfig(workers=0, format_rule={"math": "hash_line"},
                          verifier_options={"math": {"accept_unevaluated": False}})
    with RewardPipeline(config) as p:
        yield p


@pytest.fixture(scope="module")
def env(pipeline):
    return make_env(EnvConfig(name="tool", tools=["calculator"]), pipeline)


def _messages(tasks):
    return [chat_messages(t, INSTRUCTION, False) for t in tasks]


def _product(expression: str) -> int:
    """An independent value of ``a * b`` / ``a * b + c`` ... : Python ints, * before +/-."""
    total = 0
    for term_sign, term in _terms(expression):
        product = 1
        for f in term.split(" * "):
            product *= int(f)
        total += term_sign * product
    return total


def _terms(expression: str):
    parts = expression.replace(" - ", " + -").split(" + ")
    return [(-1, p[1:]) if p.startswith("-") else (1, p) for p in parts]


def test_demonstrations_call_the_expression_and_show_the_calculators_real_output(env):
    tasks = generate("3dx3d,4dx2d,mixed3,words1,words2", 12, seed=5)
    demos, rejected = tool_demonstrations(env, tasks, _messages(tasks))
    assert rejected == 0 and [d.task for d in demos] == tasks
    for demo in demos:
        expression = demo.task.metadata["expression"]
        system, user, call, observation, answer = demo.messages
        assert demo.initial == 2 and system["role"] == "system" and "<calculator>" in \
            system["content"]
        assert user == {"role": "user", "content": f"{demo.task.prompt}\n{INSTRUCTION}"}
        assert call == {"role": "assistant", "content": f"<calculator>{expression}</calculator>"}
        value = _product(expression)
        assert observation == {"role": "tool", "content": calculator(expression)}
        assert observation["content"] == str(value) == demo.task.reference
        assert answer == {"role": "assistant", "content": f"{expression} = {value}\n#### {value}"}


def test_only_demonstrations_whose_answer_verifies_are_kept(env):
    good, wrong_ref, no_expr, refused = generate("3dx3d", 4, seed=1)
    tasks = [good, replace(wrong_ref, reference="1"), replace(no_expr, metadata={}),
             replace(refused, metadata={"expression": "2 ** 0.5"})]  # calculator: an error
    demos, rejected = tool_demonstrations(env, tasks, _messages(tasks))
    assert [d.task.id for d in demos] == [good.id] and rejected == 3


def test_an_environment_without_the_calculator_is_refused(pipeline):
    python_only = make_env(EnvConfig(name="tool", tools=["python"]), pipeline)
    tasks = generate("3dx3d", 1, seed=0)
    with pytest.raises(DemonstrationError, match="needs an environment that offers the "
                                                 "'calculator' tool"):
        tool_demonstrations(python_only, tasks, _messages(tasks))
    with pytest.raises(DemonstrationError, match="no SFT task has metadata.expression"):
        tool_demonstrations(make_env(EnvConfig(name="tool", tools=["calculator"]), pipeline),
                            [replace(tasks[0], metadata={})], _messages(tasks))


def _encoded(env, tokenizer, seed=2):
    tasks = generate("mixed3", 1, seed=seed)
    demo = tool_demonstrations(env, tasks, _messages(tasks))[0][0]
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return demo, end, *encode_demonstration(tokenizer, demo.messages, demo.initial, end)


def test_tokens_are_prompt_turns_and_inserted_observation_ids_in_order(tiny, env):
    _, tokenizer = tiny
    demo, end, ids, assistant = _encoded(env, tokenizer)
    m = demo.messages
    prompt = tokenizer(tokenizer.apply_chat_template(m[:2], add_generation_prompt=True,
                                                     tokenize=False),
                       add_special_tokens=False).input_ids
    call = tokenizer(m[2]["content"], add_special_tokens=False).input_ids + [end]
    inserted = observation_ids(tokenizer, m[:3], m[3:4], end)
    answer = tokenizer(m[4]["content"], add_special_tokens=False).input_ids + [end]
    assert ids == prompt + call + inserted + answer
    assert assistant == ([False] * len(prompt) + [True] * len(call) + [False] * len(inserted)
                         + [True] * len(answer))
    # the same ids as the whole conversation rendered by the chat template (its final "\n"
    # after the last end-of-turn token is never sampled)
    full = tokenizer(tokenizer.apply_chat_template(m, tokenize=False),
                     add_special_tokens=False).input_ids
    assert ids == full[:-1]
    text = tokenizer.decode([i for i, a in zip(ids, assistant) if a], skip_special_tokens=False)
    assert text == f"{m[2]['content']}<|im_end|>{m[4]['content']}<|im_end|>"


class _LogitsProbe(torch.nn.Module):
    """The model with ``delta`` added to its logits, so the loss's gradient with respect to
    each position's logits can be read off ``delta.grad`` (one unpadded row)."""

    def __init__(self, model, width: int):
        super().__init__()
        self.model = model
        self.delta = torch.zeros(1, width, model.config.vocab_size, requires_grad=True)

    def forward(self, input_ids, logits_to_keep=0, **kwargs):
        logits = self.model(input_ids=input_ids, logits_to_keep=logits_to_keep,
                            **kwargs).logits
        return SimpleNamespace(logits=logits + self.delta[:, input_ids.shape[1]
                                                          - logits.shape[1]:])


def test_sft_gradient_is_zero_on_prompt_and_observation_tokens(tiny, env):
    model, tokenizer = tiny
    demo, end, ids, assistant = _encoded(env, tokenizer)
    labels = [i if a else -100 for i, a in zip(ids, assistant)]
    probe = _LogitsProbe(model, len(ids))
    loss = _step(probe, [(ids, labels)], tokenizer.pad_token_id, bf16=False)
    loss.backward()
    per_position = probe.delta.grad[0].abs().sum(-1)  # logits at t predict token t + 1
    predicts_assistant = torch.tensor(assistant[1:] + [False])
    assert torch.all(per_position[~predicts_assistant] == 0)
    assert torch.all(per_position[predicts_assistant] > 0)
    assert int(predicts_assistant.sum()) == sum(assistant)


def test_encoded_demonstrations_train_through_run_sft(tiny, env):
    _, tokenizer = tiny
    model = load_model_and_tokenizer("tiny-random")[0].float()  # its own copy: trained here
    tasks = generate("3dx3d,words2", 8, seed=3)
    demos, _ = tool_demonstrations(env, tasks, _messages(tasks))
    data, counts = encode_demonstrations(tokenizer, demos, max_length=4096)
    assert len(data) == 8 and counts["truncated"] == 0
    report = run_sft(model, tokenizer, [], [], SFTConfig(batch_size=4, epochs=3,
                                                         learning_rate=1e-2),
                     seed=0, bf16=False, encoded=(data, counts), log=lambda *_: None)
    assert report.kept == 8 and report.steps == 6
    assert report.final_loss < report.first_loss
    # cut at max_length: counted like single-turn examples
    short = encode_demonstrations(tokenizer, demos, max_length=len(data[0][0]) - 3,
                                  log=lambda *_: None)[1]
    assert short["truncated"] >= 1
