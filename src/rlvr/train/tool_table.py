"""The "no tool" row of a tool-use run: the three-row table on the same held-out
problems.

A run with an environment (``env.name`` other than ``single_turn``) validates its policy
through episodes; its results table then shows

- ``no tool``: the model before SFT, validated *without* the environment: one greedy turn on
  the plain prompt (the question and instruction, no tool system message), what the model does
  in its head (:func:`validate_without_tools`, ``eval.no_tool_baseline``);
- ``SFT tool model``: the model that entered GRPO (results.json ``baseline``), with the tool;
- ``GRPO tool model``: the trained model (``trained``), with the tool.

All three on the run's validation tasks, scored by the same reward pipeline with the same
``eval.max_new_tokens``. The no-tool row is computed once, before SFT, and saved as
:data:`NO_TOOL_FILE` (a resume reads it back); :func:`add_no_tool` puts it into the results
(``no_tool``, ``gain_over_no_tool``).
"""

from __future__ import annotations

import json
from pathlib import Path

from rlvr.progress import Phase
from rlvr.tasks.prompting import prompt_ids
from rlvr.train.checkpoint import write_json_atomic
from rlvr.train.logs import console
from rlvr.train.policy import sync_engine
from rlvr.train.state import TrainingState
from rlvr.train.validate import validate

NO_TOOL_FILE = "no_tool_validation.json"
NO_TOOL_LABEL = "no_tool"


def wanted(config) -> bool:
    """Whether the run validates a no-tool row: ``eval.no_tool_baseline`` and an environment
    other than ``single_turn``."""
    env = getattr(config, "env", None)
    return bool(config.eval.no_tool_baseline and env is not None
                and env.name != "single_turn")


def validate_without_tools(state: TrainingState, config, run_dir: Path, eval_rewards) -> dict:
    """Greedy single-turn validation of ``state.policy`` on the validation tasks with their
    plain prompts (:func:`rlvr.tasks.prompting.prompt_ids`: no environment, no tool message),
    saved as ``run_dir/``:data:`NO_TOOL_FILE`; returns the row (``label`` ``no_tool``,
    ``step`` 0 and :class:`rlvr.train.validate.ValidationResult`'s fields). When the file
    exists already (a resumed run) it is read back instead."""
    path = run_dir / NO_TOOL_FILE
    saved = no_tool_row(run_dir)
    if saved is not None:
        return saved
    s, c = state, config
    prompts = [prompt_ids(s.models.tokenizer, t, s.data.instruction(t), c.data.one_shot)
               for t in s.data.val_tasks]
    s.models.policy.eval()
    sync_engine(s.models.engine, s.models.policy)
    with Phase("validation without the tool", len(prompts), console, unit="problems") as phase:
        result, samples = validate(
            s.models.engine, s.models.tokenizer, s.data.val_tasks, prompts, eval_rewards,
            max_new_tokens=c.eval.max_new_tokens, stop_token_ids=s.stop_ids,
            batch_size=c.eval.batch_size, progress=phase.update)
    s.models.policy.train()
    row = {"label": NO_TOOL_LABEL, "step": 0, **result.__dict__, "samples": samples[:20]}
    write_json_atomic(path, row)
    console.print(f"[bold]validation[/] without the tool (model before SFT, one turn): "
                  f"{result.pass_at_1_text()}, format {result.format_rate:.1%}, length "
                  f"{result.mean_length:.1f}, {result.seconds:.0f} s")
    return row


def no_tool_row(run_dir: Path) -> dict | None:
    """The saved no-tool row of a run directory, or ``None`` (none saved; an unreadable file
    counts as none, so the row is computed again)."""
    path = run_dir / NO_TOOL_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def add_no_tool(results: dict, run_dir: Path) -> dict:
    """Add the run's no-tool row to ``results`` (in place; returned): ``no_tool`` (the row
    without its samples) and ``gain_over_no_tool`` (trained pass@1 minus the row's). Nothing
    is added when the run has none."""
    row = no_tool_row(run_dir)
    if row is None:
        return results
    row = {k: v for k, v in row.items() if k != "samples"}
    results["no_tool"] = row
    results["gain_over_no_tool"] = results["trained"]["pass_at_1"] - row["pass_at_1"]
    return results
