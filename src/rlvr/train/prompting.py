"""Turn a task into the token ids the policy sees: the tokenizer's chat template over a user
turn (question + format instruction), optionally after one worked example."""

from __future__ import annotations

from rlvr.records import Task

ONE_SHOT_QUESTION = "What is 23 + 48?"
ONE_SHOT_ANSWER = "23 + 48 = 71\n#### 71"


def user_turn(question: str, instruction: str) -> str:
    """The user turn: the question, then the instruction on its own line (nothing is added
    for an empty instruction, e.g. logic puzzles that state their own answer format)."""
    return f"{question}\n{instruction}" if instruction else question


def chat_messages(task: Task, instruction: str, one_shot: bool) -> list[dict[str, str]]:
    """The chat messages for ``task``: ``[example user, example assistant,] user``."""
    messages = []
    if one_shot:
        messages += [{"role": "user", "content": user_turn(ONE_SHOT_QUESTION, instruction)},
                     {"role": "assistant", "content": ONE_SHOT_ANSWER}]
    messages.append({"role": "user", "content": user_turn(task.prompt, instruction)})
    return messages


def prompt_ids(tokenizer, task: Task, instruction: str, one_shot: bool) -> list[int]:
    """Token ids of the chat-formatted prompt, ending with the assistant turn's header."""
    text = tokenizer.apply_chat_template(chat_messages(task, instruction, one_shot),
                                         add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False).input_ids


def stop_token_ids(tokenizer) -> tuple[int, ...]:
    """Token ids that end a completion: the tokenizer's EOS and the chat end-of-turn token."""
    ids = {tokenizer.eos_token_id}
    end_of_turn = tokenizer.convert_tokens_to_ids("<|im_end|>")
    if isinstance(end_of_turn, int) and end_of_turn != tokenizer.unk_token_id:
        ids.add(end_of_turn)
    return tuple(sorted(i for i in ids if i is not None))
