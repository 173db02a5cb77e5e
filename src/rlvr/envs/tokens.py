"""The token ids an observation inserts into an episode, from the chat template itself.

An episode is one token sequence: ``[prompt ids] + [sampled] + [inserted] + [sampled] +
...``, turn after turn. The sampled ids are the policy's own (never re-tokenised: re-encoding the
decoded text can give other ids than the ones sampled, and the trained tokens must be the
sampled ones). Only what the environment adds is tokenised here: the chat template's text for
the new message(s), plus the next assistant header (the generation prompt), minus what the
model already sampled of the closing of its own turn.

With ``H`` = the template over the messages before the assistant turn with the generation
prompt (what the model continued from), ``A`` = the template over the messages through the
assistant turn, and ``B`` = the template over those plus the new message(s) with the
generation prompt, the template must render ``A = H + content + close`` and ``B = A + delta``
(it renders earlier turns the same way whatever follows: true of ChatML templates such as
SmolLM2's and Qwen2.5's; a template that rewrites earlier turns, e.g. one that drops their
``<think>`` blocks, raises :class:`ChatTemplateError`). The inserted text is ``close`` without
the stop token the model sampled (SmolLM2: ``<|im_end|>`` sampled, ``"\\n"`` left) followed by
``delta``; it starts at a special token boundary, so tokenising it alone gives the ids a
tokenisation of the whole conversation has there.
"""

from __future__ import annotations

from collections.abc import Sequence

from rlvr.envs.types import Message


class ChatTemplateError(ValueError):
    """The chat template does not render a conversation as a sequence of appended turns, so
    observations cannot be inserted as token ids; the message says which check failed."""


def _render(tokenizer, messages: Sequence[Message], generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(list(messages), tokenize=False,
                                         add_generation_prompt=generation_prompt)


def observation_text(tokenizer, messages: Sequence[Message], new: Sequence[Message] | Message,
                     stop_token_id: int | None = None) -> str:
    """The text the chat template inserts after a sampled assistant turn for ``new``, through
    the next assistant header (see the module doc).

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
        messages: the conversation through the assistant turn just sampled (its last message,
            role ``assistant``, holds the turn's decoded text).
        new: the message(s) to insert (an observation: role ``tool`` or ``user``).
        stop_token_id: the id that ended the sampled turn (its last id) when it is a stop
            token, else ``None``; its text is not inserted again when the template closes the
            turn with it.

    Raises:
        ValueError: ``messages`` does not end with an assistant message, or ``new`` is empty.
        ChatTemplateError: the template is not append-only (see the module doc).
    """
    new = [new] if isinstance(new, dict) else list(new)
    if not messages or messages[-1].get("role") != "assistant":
        raise ValueError("messages must end with the assistant turn just sampled")
    if not new:
        raise ValueError("no message to insert")
    head = _render(tokenizer, messages[:-1], True) + messages[-1]["content"]
    closed = _render(tokenizer, messages, False)
    after = _render(tokenizer, [*messages, *new], True)
    if not closed.startswith(head):
        raise ChatTemplateError("the chat template does not render the assistant turn as the "
                                "generation prompt followed by its content")
    if not after.startswith(closed):
        raise ChatTemplateError("the chat template renders earlier turns differently once a "
                                "message follows them")
    close = closed[len(head):]
    if stop_token_id is not None:
        stop = tokenizer.decode([stop_token_id], skip_special_tokens=False)
        if stop and close.startswith(stop):
            close = close[len(stop):]
    return close + after[len(closed):]


def observation_ids(tokenizer, messages: Sequence[Message], new: Sequence[Message] | Message,
                    stop_token_id: int | None = None) -> list[int]:
    """The token ids to insert after a sampled assistant turn: :func:`observation_text`
    tokenised without added special tokens (BOS / EOS), as prompts are
    (:func:`rlvr.tasks.prompting.prompt_ids`). Arguments and errors as
    :func:`observation_text`."""
    text = observation_text(tokenizer, messages, new, stop_token_id)
    return list(tokenizer(text, add_special_tokens=False).input_ids)
