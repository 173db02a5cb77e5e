"""The task data ``rlvr eval`` evaluates: a run config's data section with the command line's
choices (task source, data path, generator levels, split, limit, prompt) applied."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from rlvr.eval.evaluate import EvalError
from rlvr.tasks.config import DataConfig, carry_instruction
from rlvr.tasks.registry import needs_data_path, splits_in_one_file

SPLITS = ("validation", "train")

# DataConfig field -> the `rlvr eval` option that sets it, for messages
_OPTION = {"source": "--tasks", "path": "--data-path", "mixture": "--mixture",
           "val_size": "--limit", "train_size": "--limit", "instruction": "--instruction"}


def eval_data_config(data, *, tasks: str | None, data_path: Path | None,
                     mixture: str | None, split: str, limit: int | None,
                     instruction: str | None, one_shot: bool | None):
    """The :class:`rlvr.tasks.config.DataConfig` to evaluate: ``data`` (a run config's data
    section) with the given choices applied (None: keep the config's).

    Another source than the config's drops the config's path and generator levels, and carries
    its instruction over only when it is not the old source's default. With
    ``split="validation"`` a data *file* is evaluated whole (``limit``: its first N records),
    not a hold-out of it; an MBPP file holds all its splits, so its validation ids are used.

    Args:
        data: the run config's ``DataConfig``.
        tasks: the task source (``data.source``).
        data_path: a data file or directory (``data.path``).
        mixture: generator levels (``data.mixture``).
        split: ``validation`` or ``train``.
        limit: problems to evaluate (``val_size``, or ``train_size`` with the train split).
        instruction, one_shot: the prompt (``data.instruction``, ``data.one_shot``).

    Raises:
        EvalError: a bad value; the message starts with the ``rlvr eval`` option that set it
            (``--split``, ``--tasks``, ``--data-path``, ``--mixture``, ``--limit``,
            ``--instruction``) or else the ``data.`` field.
    """
    if split not in SPLITS:
        raise EvalError(f"--split: expected validation or train, got {split!r}")
    updates = {"source": tasks, "path": None if data_path is None else str(data_path),
               "mixture": mixture, "instruction": instruction, "one_shot": one_shot,
               ("val_size" if split == "validation" else "train_size"): limit}
    fields = data.model_dump()
    if tasks is not None and tasks != fields["source"]:
        # another source: the config's path and generator levels do not apply, and its
        # instruction carries over only when it is not the old source's default one
        del fields["mixture"]
        fields["path"] = fields["val_path"] = None
        fields["instruction"] = carry_instruction(fields["instruction"], fields["source"], tasks)
    fields.update({key: value for key, value in updates.items() if value is not None})
    if split == "validation":  # the validation set never depends on train_size: skip the work
        fields["train_size"] = 1
        if (data_path is not None and data_path.is_file()
                and not splits_in_one_file(fields["source"])):
            # the file given is what is evaluated: every record (--limit: the first N), not
            # a hold-out of it (an MBPP file holds all its splits: its validation ids are used)
            fields["val_path"] = str(data_path)
    try:
        config = DataConfig.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else "data"
        raise EvalError(f"{_OPTION.get(field, 'data.' + field)}: {first['msg']}"
                        f" (got {first.get('input')!r})") from None
    if needs_data_path(config.source) and not config.path:
        raise EvalError(f"--data-path: --tasks {config.source} needs --data-path (its data file "
                        f"or directory: the dataset is not generated)")
    if config.path and not Path(config.path).exists():
        raise EvalError(f"--data-path: {config.path} does not exist")
    return config
