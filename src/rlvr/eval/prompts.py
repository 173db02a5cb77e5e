"""How ``rlvr eval`` prompts a model: its format instruction and one-shot choice, and where they
came from (the command line, the run config, the settings saved with a checkpoint, or the task
source's default)."""

from __future__ import annotations

from pathlib import Path


def wants_saved_prompt(config: Path | None, instruction: str | None,
                       one_shot: bool | None) -> bool:
    """Whether the prompt settings saved with a model are consulted: only without a run config
    and when the command line leaves the instruction or the one-shot choice open."""
    return config is None and (instruction is None or one_shot is None)


def model_prompt(name: str, data, *, instruction: str | None, one_shot: bool | None,
                 config: Path | None, saved) -> dict:
    """How model ``name`` is prompted: ``instruction`` / ``one_shot`` when given, else
    ``config``'s data section (``data``), else the prompt settings ``saved`` with the model
    (a checkpoint or sft_model/ of ``rlvr train``:
    :func:`rlvr.tasks.prompting.saved_prompt`), else the default of the task source
    (``data.instruction``).

    Args:
        name: the model (for the origin text).
        data: the evaluated :class:`rlvr.train.config.DataConfig`.
        instruction, one_shot: the command line's choices (None: not given).
        config: the run config given, or None.
        saved: the model's :class:`rlvr.tasks.prompting.SavedPrompt`, or None.

    Returns:
        ``{"instruction", "one_shot", "from", "saved"}``: ``from`` says where the instruction
        came from (``--instruction``, ``--config PATH``, ``saved with the model: FILE`` or the
        source's default); ``saved`` is ``saved``.
    """
    if instruction is not None:
        text, origin = instruction, "--instruction"
    elif config is not None:
        text, origin = data.instruction, f"--config {config}"
    elif saved is not None:
        text = saved.instruction_for(data.source)
        origin = f"saved with the model: {saved.origin}"
    else:
        text, origin = data.instruction, (f"the default for --tasks {data.source}; {name} has "
                                          f"no saved prompt settings")
    shot = (one_shot if one_shot is not None else data.one_shot if config is not None
            or saved is None else saved.one_shot)
    return {"instruction": text, "one_shot": shot, "from": origin, "saved": saved}


def template_differs(tokenizer, saved) -> bool:
    """True when ``tokenizer``'s chat template is not the one the model was trained with (as
    recorded in its saved prompt settings ``saved``); False when nothing was recorded."""
    trained = saved.settings.get("chat_template") if saved is not None else None
    return bool(trained) and getattr(tokenizer, "chat_template", None) != trained
