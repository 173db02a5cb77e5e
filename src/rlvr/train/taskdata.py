"""A run's tasks: training and validation tasks of ``data`` (one source or the weighted
``sources`` mixture), their encoded prompts, which mixture source each training task came
from, and each task's instruction."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from rlvr.data.check import drop_unverifiable
from rlvr.records import Task
from rlvr.rewards.registry import VERIFIERS
from rlvr.tasks.prompting import prompt_ids
from rlvr.tasks.registry import in_process
from rlvr.tasks.sources import load_tasks


@dataclass
class RunData:
    """The tasks of a run, in training order.

    Attributes:
        train_tasks, val_tasks: the tasks.
        train_prompts, val_prompts: their prompt token ids (same order), set once the
            tokenizer is loaded.
        pool_of: per training task, the label of its mixture source (``None`` with a single
            source): the sampler's pools.
        instructions: task id -> instruction, for tasks of a mixture source; others use
            ``data.instruction``.
        default_instruction: ``data.instruction``.
    """

    train_tasks: list[Task] = field(default_factory=list)
    val_tasks: list[Task] = field(default_factory=list)
    train_prompts: list[list[int]] = field(default_factory=list)
    val_prompts: list[list[int]] = field(default_factory=list)
    pool_of: list[str | None] = field(default_factory=list)
    instructions: dict[str, str] = field(default_factory=dict)
    default_instruction: str = ""

    def instruction(self, task: Task) -> str:
        """The instruction appended to ``task``'s question: its mixture source's, else
        ``data.instruction``."""
        return self.instructions.get(task.id, self.default_instruction)

    def encode(self, tokenizer, one_shot: bool) -> None:
        """Fill ``train_prompts`` / ``val_prompts`` (chat template, instruction, optional
        one-shot example: :func:`rlvr.tasks.prompting.prompt_ids`)."""
        def encode(t):
            return prompt_ids(tokenizer, t, self.instruction(t), one_shot)

        self.train_prompts = [encode(t) for t in self.train_tasks]
        self.val_prompts = [encode(t) for t in self.val_tasks]


def load_run_data(config, eval_rewards, log: Callable[[str], None]) -> RunData:
    """Train and validation tasks of ``config.data`` (one source, or the weighted ``sources``,
    each loaded with seed ``seed + 101 * i`` and interleaved), minus file-source tasks whose
    reference does not verify with ``eval_rewards`` (``data.check_references``; tasks a
    generator made in-process are not checked). Prompts are not encoded yet.

    Raises:
        ValueError: bad data (:class:`rlvr.tasks.sources.DataError`), or no training or
            validation task left.
    """
    c = config
    specs = c.data.sources or [None]
    train, val, instructions = [], [], {}
    for i, spec in enumerate(specs):
        data = c.data.source_config(spec)
        part_train, part_val = load_tasks(data, c.seed + 101 * i, log=log,
                                          known_types=VERIFIERS.names())
        if c.data.check_references and not in_process(data):
            part_train = _verified(part_train, eval_rewards, log)
            part_val = _verified(part_val, eval_rewards, log)
        label = (spec.name or spec.source) if spec is not None else None
        if spec is not None:
            instructions.update((t.id, data.instruction) for t in part_train + part_val)
        train += [(label, t) for t in part_train]
        val += part_val
    if len(specs) > 1:  # interleave, so SFT's first examples come from every source
        random.Random(c.seed).shuffle(train)
    pool_of = [label for label, _ in train]
    if not train or not val:
        raise ValueError("no training or validation tasks left")
    return RunData(train_tasks=[t for _, t in train], val_tasks=val, pool_of=pool_of,
                   instructions=instructions, default_instruction=c.data.instruction)


def _verified(tasks: list[Task], eval_rewards, log: Callable[[str], None]) -> list[Task]:
    kept, dropped = drop_unverifiable(tasks, eval_rewards)
    if dropped:
        log(f"[yellow]data.check_references[/]: dropped {len(dropped)} of "
            f"{len(tasks)} tasks whose reference does not verify: "
            + ", ".join(d.id for d in dropped[:10])
            + (" ..." if len(dropped) > 10 else ""))
    return kept
