"""Turn a task into the token ids the policy sees: the tokenizer's chat template over a user
turn (question + format instruction), optionally after one worked example; and the prompt
settings saved with every checkpoint (:data:`PROMPT_FILE`), so that a model is evaluated with
the prompts it was trained on."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from rlvr.records import Task
from rlvr.tasks.config import DataConfig, carry_instruction

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


# ----------------------------------------------------------------- prompt settings of a model

PROMPT_FILE = "rlvr_prompt.json"  # written into every checkpoint and sft_model/ of a run
PROMPT_FORMAT = 1


def prompt_settings(data, tokenizer=None) -> dict:
    """The settings that decide how a run's model was prompted, as saved with its
    checkpoints (:data:`PROMPT_FILE`): ``source``, ``instruction``, ``one_shot``, the
    instruction of each ``data.sources`` entry (``sources``: name -> ``{"source",
    "instruction"}``) and the tokenizer's ``chat_template`` (also saved with the tokenizer;
    kept here to tell when a different one is loaded).

    Args:
        data: the run's :class:`rlvr.tasks.config.DataConfig`.
        tokenizer: the run's tokenizer (``None``: no chat template recorded).
    """
    return {"format": PROMPT_FORMAT, "source": data.source, "instruction": data.instruction,
            "one_shot": data.one_shot,
            "sources": {(spec.name or spec.source): {"source": spec.source,
                                                     "instruction": data.instruction_for(spec)}
                        for spec in data.sources},
            "chat_template": getattr(tokenizer, "chat_template", None)}


def write_prompt_settings(directory: Path, settings: dict) -> None:
    """Write ``settings`` (:func:`prompt_settings`) as ``directory/``:data:`PROMPT_FILE`."""
    (Path(directory) / PROMPT_FILE).write_text(json.dumps(settings, indent=2) + "\n",
                                               encoding="utf-8")


@dataclass(frozen=True)
class SavedPrompt:
    """How a model directory was prompted in training.

    Attributes:
        settings: :func:`prompt_settings` of its run.
        origin: the file they were read from: the directory's :data:`PROMPT_FILE`, or (a
            checkpoint written before that file existed) its run's ``config.yaml``.
    """

    settings: dict
    origin: Path

    def instruction_for(self, source: str) -> str:
        """The instruction the model saw for ``source`` tasks: a ``data.sources`` entry of
        that source, else the run's instruction carried over to it
        (:func:`rlvr.tasks.config.carry_instruction`)."""
        for entry in self.settings.get("sources", {}).values():
            if entry.get("source") == source:
                return entry["instruction"]
        return carry_instruction(self.settings["instruction"], self.settings["source"], source)

    @property
    def one_shot(self) -> bool:
        return bool(self.settings.get("one_shot", False))


def saved_prompt(model: str | Path) -> SavedPrompt | None:
    """The prompt settings saved with a model directory: its :data:`PROMPT_FILE`, else, for a
    run's ``sft_model/`` or ``checkpoints/step-N/`` saved before that file existed, the
    run's ``config.yaml``; ``None`` for anything else (a model name, a hub id, a directory
    not written by ``rlvr train``).

    Raises:
        ValueError: the file exists but cannot be read (the message names it).
    """
    directory = Path(model)
    if not directory.is_dir():
        return None
    path = directory / PROMPT_FILE
    if path.is_file():
        try:
            settings = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(settings, dict) or "instruction" not in settings:
                raise ValueError("no 'instruction' field")
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: unreadable prompt settings ({exc})") from None
        return SavedPrompt(settings, path)
    run_dir = (directory.parent if directory.name == "sft_model"
               else directory.parent.parent if directory.parent.name == "checkpoints" else None)
    if run_dir is None or not (run_dir / "config.yaml").is_file():
        return None
    config = run_dir / "config.yaml"
    try:
        loaded = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
        data = DataConfig.model_validate(loaded.get("data") or {})
    except (OSError, ValueError, AttributeError) as exc:
        raise ValueError(f"{config}: unreadable run config ({exc})") from None
    return SavedPrompt(prompt_settings(data), config)
