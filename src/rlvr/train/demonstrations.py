"""Tool-use demonstrations for the SFT cold start (``sft.demonstrations: tool``).

A demonstration is a whole episode of the run's environment, played with scripted assistant
turns instead of sampled ones::

    system   the environment's tool description (ToolEnv.initial_messages)
    user     the task's question and instruction (as GRPO prompts it)
    assistant <calculator>347 * 628</calculator>          <- trained
    tool     217916                                        <- the calculator's real output, masked
    assistant 347 * 628 = 217916\n#### 217916               <- trained

The call's expression is the task's ``metadata["expression"]``; the environment really runs
the calculator (:meth:`rlvr.envs.Environment.step_many`, the same code path as GRPO's
episodes), the answer turn copies the observation, and the environment's reward pipeline
judges the episode: only demonstrations whose final answer verifies correct are kept.

Encoding (:func:`encode_demonstration`) builds the token sequence GRPO's episodes have: the
chat template over the initial messages with the generation prompt, each assistant turn's
content tokens plus the end-of-turn token (labelled), and between turns exactly the ids the
environment inserts for the observation (:func:`rlvr.envs.observation_ids`, unlabelled). So the
SFT loss covers the assistant tokens only, and a changed observation changes no loss term of
its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rlvr.envs import Environment, Episode, Message, Turn, observation_ids
from rlvr.records import Task
from rlvr.train.sft import fit_examples

#: The tool a demonstration calls.
DEMO_TOOL = "calculator"


class DemonstrationError(ValueError):
    """Demonstrations cannot be made: the environment does not offer the calculator, or no
    task carries an expression; the message says which."""


@dataclass(frozen=True)
class Demonstration:
    """One verified demonstration.

    Attributes:
        task: the task it solves.
        messages: the whole conversation (OpenAI chat format): the ``initial`` prompt
            messages, then assistant turns and observations in order.
        initial: how many of ``messages`` are the prompt.
    """

    task: Task
    messages: list[Message]
    initial: int


def call_text(expression: str) -> str:
    """The demonstrated tool-call turn: ``<calculator>EXPR</calculator>``."""
    return f"<{DEMO_TOOL}>{expression}</{DEMO_TOOL}>"


def answer_text(expression: str, observation: str) -> str:
    """The demonstrated answer turn after the calculator's ``observation``: the calculation,
    then the answer line, ``EXPR = N\n#### N`` (what the ``hash_line`` format rule, which
    wants a line before the answer, and the math verifier read)."""
    result = observation.strip()
    return f"{expression} = {result}\n#### {result}"


def tool_demonstrations(env: Environment, tasks: Sequence[Task],
                        messages: Sequence[Sequence[Message]]) -> tuple[list[Demonstration], int]:
    """Play one scripted episode per task (call, real tool output, answer) through ``env``
    and keep those the environment's reward pipeline scores correct.

    Args:
        env: the run's environment (``tool``, offering ``calculator``).
        tasks: the tasks; those without ``metadata["expression"]`` are skipped (rejected).
        messages: each task's chat messages as GRPO prompts it
            (:func:`rlvr.tasks.prompting.chat_messages`).

    Returns:
        ``(demonstrations, rejected)``: the verified ones in task order, and how many tasks
        gave none (no expression, no observation, or an answer that does not verify).

    Raises:
        DemonstrationError: ``env`` offers no calculator, or no task has an expression.
        ValueError: ``tasks`` and ``messages`` differ in length.
    """
    if len(tasks) != len(messages):
        raise ValueError(f"tool_demonstrations: {len(tasks)} tasks, {len(messages)} message lists")
    if DEMO_TOOL not in getattr(env, "tools", {}):
        raise DemonstrationError(f"sft.demonstrations: tool needs an environment that offers "
                                 f"the {DEMO_TOOL!r} tool (env.name: tool, env.tools: "
                                 f"[{DEMO_TOOL}, ...]); got env {env.name!r} with tools "
                                 f"{sorted(getattr(env, 'tools', {}))}")
    playable = [(t, m) for t, m in zip(tasks, messages) if t.metadata.get("expression")]
    if tasks and not playable:
        raise DemonstrationError("sft.demonstrations: tool: no SFT task has "
                                 "metadata.expression (the calculator call to demonstrate); "
                                 "use a generated arithmetic source (arithmetic, "
                                 "tool_arithmetic)")
    episodes = [env.start(t, m) for t, m in playable]
    calls = [Turn(call_text(t.metadata["expression"])) for t, _ in playable]
    answers: list[tuple[Episode, Turn]] = []
    for episode, result in zip(episodes, env.step_many(episodes, calls)):
        if not result.done:
            observation = str(result.observation["content"])
            answers.append((episode, Turn(answer_text(episode.task.metadata["expression"],
                                                      observation))))
    if answers:
        env.step_many([e for e, _ in answers], [t for _, t in answers])
    kept = [Demonstration(e.task, [dict(m) for m in e.messages], e.initial)
            for e, _ in answers if e.reward is not None and e.reward.status.value == "correct"]
    return kept, len(tasks) - len(kept)


def encode_demonstration(tokenizer, messages: Sequence[Message], initial: int,
                         end_id: int) -> tuple[list[int], list[bool]]:
    """The token ids of a conversation as an episode holds them, and which are the
    assistant's (see the module doc).

    Args:
        tokenizer: the policy's tokenizer (a chat template that renders turns append-only,
            as :func:`rlvr.envs.observation_ids` requires).
        messages: the conversation; after the ``initial`` prompt messages it starts with an
            assistant turn, and every run of non-assistant messages (observations) follows
            one.
        initial: how many messages are the prompt.
        end_id: the end-of-turn id the model samples to end a turn (``<|im_end|>``).

    Returns:
        ``(ids, assistant)``: equal-length lists; ``assistant[i]`` is true for the tokens of
        assistant turns (content and end-of-turn id), false for the prompt and the inserted
        observation ids.

    Raises:
        ValueError: no assistant turn after the prompt, or the first message after it is not
            an assistant's.
        rlvr.envs.ChatTemplateError: the template is not append-only.
    """
    rest = list(messages[initial:])
    if not rest or rest[0].get("role") != "assistant":
        raise ValueError("a demonstration continues its prompt with an assistant turn")
    prompt = tokenizer.apply_chat_template(list(messages[:initial]), add_generation_prompt=True,
                                           tokenize=False)
    ids = list(tokenizer(prompt, add_special_tokens=False).input_ids)
    assistant = [False] * len(ids)
    k = initial
    while k < len(messages):
        turn = list(tokenizer(messages[k]["content"], add_special_tokens=False).input_ids)
        turn.append(end_id)
        ids += turn
        assistant += [True] * len(turn)
        j = k + 1
        while j < len(messages) and messages[j].get("role") != "assistant":
            j += 1
        if j > k + 1:  # observations: the ids the environment inserts, never trained
            inserted = observation_ids(tokenizer, messages[: k + 1], messages[k + 1: j], end_id)
            ids += inserted
            assistant += [False] * len(inserted)
        k = j
    return ids, assistant


def encode_demonstrations(tokenizer, demonstrations: Sequence[Demonstration], max_length: int,
                          log=print) -> tuple[list[tuple[list[int], list[int]]], dict[str, int]]:
    """The SFT data of demonstrations: per demonstration ``(ids, labels)`` with labels the
    ids on assistant tokens and -100 elsewhere (:func:`encode_demonstration`), cut to
    ``max_length`` and accounted as single-turn examples are
    (:func:`rlvr.train.sft.fit_examples`: counts, log line, error).

    Raises:
        rlvr.train.sft.SFTInputError: no demonstration keeps an assistant token within
            ``max_length``.
    """
    end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    encoded, prompt_lengths = [], []
    for demo in demonstrations:
        ids, assistant = encode_demonstration(tokenizer, demo.messages, demo.initial, end_id)
        labels = [i if a else -100 for i, a in zip(ids, assistant)]
        encoded.append((ids[:max_length], labels[:max_length], len(ids)))
        prompt_lengths.append(assistant.index(True))
    return fit_examples(encoded, prompt_lengths, max_length, log)
