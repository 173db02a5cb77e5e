"""The ``data`` section of the run config (:class:`DataConfig`, :class:`DataSource`) and the
instruction defaults of the task sources (:func:`default_instruction`,
:func:`carry_instruction`).

It lives with the task sources (not in :mod:`rlvr.train.config`, which re-exports it) so that
``rlvr.eval`` and ``rlvr.data`` can read a run's data section without importing ``rlvr.train``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from rlvr.configio import ConfigModel
from rlvr.io import DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_PROMPT_CHARS
from rlvr.limits import MAX_COEF, MAX_INPUT_BYTES, MAX_ROWS
from rlvr.tasks.registry import SOURCES, is_source, source_names, task_source

DEFAULT_INSTRUCTION = (
    "Solve the problem. Write each calculation on its own line, then give the final answer "
    "on a last line of the form '#### <answer>'."
)


def default_instruction(source: str) -> str:
    """The instruction a source gets unless one is configured: its registered one
    (:attr:`rlvr.tasks.registry.TaskSource.instruction`: none for ``logic``, whose prompts end
    with their answer format), else :data:`DEFAULT_INSTRUCTION` (also for names not
    registered here, e.g. a plugin's source in a saved run)."""
    own = task_source(source).instruction if is_source(source) else None
    return DEFAULT_INSTRUCTION if own is None else own


def carry_instruction(instruction: str, from_source: str, to_source: str) -> str:
    """The instruction for ``to_source`` given the one chosen for ``from_source``: the same
    text, unless it is ``from_source``'s default, which stands for "the source's default" and
    becomes ``to_source``'s (so the default math instruction is not appended to logic puzzles,
    while an instruction a model was trained with is kept)."""
    if from_source == to_source or instruction != default_instruction(from_source):
        return instruction
    return default_instruction(to_source)


def check_mixture(source: str, mixture: str) -> str:
    """``mixture`` if it names levels of the generated ``source``'s generator (arithmetic:
    rlvr.tasks.arithmetic.PRESETS; logic: rlvr.tasks.logic.LEVELS;
    :meth:`rlvr.tasks.registry.TaskSource.check_mixture`), else ``ValueError`` with the
    generator's message (naming the known levels)."""
    if not is_source(source) or not task_source(source).generated:
        return mixture
    try:
        task_source(source).check_mixture(mixture)
    except KeyError as exc:
        raise ValueError(f"{exc.args[0]} (data.source: {source})") from None
    except ValueError as exc:
        raise ValueError(f"{exc} (data.source: {source})") from None
    return mixture


def _registered_source(name: str) -> str:
    """``name`` if it is a registered task source (:mod:`rlvr.tasks.registry`), else the
    error a ``Literal`` of the registered names gives (same type and message)."""
    if not is_source(name):
        names = [repr(n) for n in source_names()]
        expected = (", ".join(names[:-1]) + " or " + names[-1]) if len(names) > 1 else names[0]
        raise PydanticCustomError("literal_error", "Input should be {expected}",
                                  {"expected": expected})
    return name


class ConfigSection(ConfigModel):
    """A run-config section: unknown keys are errors, and assignments are validated."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


# A registered task source (rlvr.tasks.registry): arithmetic, logic, gsm8k, math500, jsonl,
# humaneval, mbpp, tool_arithmetic and any a plugin registers.
SourceName = Annotated[str, AfterValidator(_registered_source)]


class DataSource(ConfigSection):
    """One source of a training mixture (R26), e.g. ``{source: gsm8k, path: data/gsm8k,
    weight: 0.7}``. Unset sizes / mixture come from the ``data`` section."""

    source: SourceName = Field(description="Task source of this entry (as `data.source`).")
    path: str | None = Field(None, description="Data file or directory of this source (as "
                             "`data.path`).")
    weight: float = Field(1.0, gt=0, le=MAX_COEF,
        description="Share of prompts drawn from this source (normalised over the sources).")
    name: str | None = Field(None, description="Label in metrics (default: `source`).")
    mixture: str | None = Field(None, description="Generator levels and weights of a generated "
                                "source (as `data.mixture`); default: `data.mixture` when "
                                "`data.source` is the same source, else the source's default.")
    instruction: str | None = Field(None, description="This source's instruction (e.g. code "
                                    "vs math answer format); default `data.instruction` (when "
                                    "that is the default one: the source's default, none for "
                                    "`logic`).")
    train_size: int | None = Field(None, ge=1, le=MAX_ROWS,
        description="Training problems of this source; default `data.train_size`.")
    val_size: int | None = Field(None, ge=1, le=MAX_ROWS,
        description="Validation problems of this source; default `data.val_size`.")
    val_path: str | None = Field(None, description="This source's held-out validation file "
                                 "(see `data.val_path`).")

    @field_validator("mixture")
    @classmethod
    def _mixture_of_source(cls, mixture: str | None, info: ValidationInfo) -> str | None:
        source = info.data.get("source")
        if mixture is None or source is None or info.data.get("path"):
            return mixture
        return check_mixture(source, mixture)


class DataConfig(ConfigSection):
    source: SourceName = Field(
        "arithmetic", description=f"Task source, {SOURCES.one_of()}. `arithmetic`, `logic` "
        "(countdown, knights "
        "and knaves) and `tool_arithmetic` (3-digit products, three operands, word problems: "
        "arithmetic for the calculator tool) are generated from `mixture`, and so are "
        "`reasoning_gym` (reasoning-gym's datasets, extra `gym`) and `verifiers` (the rows of "
        "single-turn `verifiers` environments, extra `verifiers`; `verifiers_episodes`, "
        "multi-turn ones too, is what `env.source: verifiers` sets); the others read `path` "
        "(GSM8K: a directory "
        "with train.jsonl / test.jsonl, or one file; `jsonl`: the task record format).")
    sources: list[DataSource] = Field(default_factory=list, description="A mixture of sources "
                                      "with weights (R26; the seeds' default math:code is 7:3), "
                                      "replacing `source` / `path`. Prompts are drawn per slot by "
                                      "weight, deterministically from the seed; the realised "
                                      "shares are logged (`data/pool/...`) and in results.json.")
    tier_weights: dict[str, float] = Field(
        default_factory=lambda: {"easy": 0.1, "medium": 0.8, "hard": 0.1},
        description="When training tasks carry tiers (see `tiers`), draw from the tiers by "
        "these weights (each in [0, 1e6]; mostly medium: the problems whose groups have "
        "reward variance). Tasks "
        "without a tier count as medium; tiers absent from the data are left out and the rest "
        "renormalised. The run logs the tiers' task counts and draw shares at the start.")
    tiers: Literal["measured", "labels", "off"] = Field(
        "measured", description="Which `difficulty` values are sampling tiers. `measured` "
        "(default): only tiers measured on a model by `rlvr data stratify` (R24: tasks with a "
        "`pass_rate`); a dataset's own easy / medium / hard labels are not used (the run says "
        "how many it ignored). `labels`: the dataset's easy / medium / hard labels too. `off`: "
        "no tiers, every task drawn alike.")
    check_references: bool = Field(True, description="Drop file-source tasks whose reference "
                                   "does not verify against itself (R27), printing their ids; "
                                   "training never trains on a reference its verifier "
                                   "cannot read.")
    path: str | None = Field(None, description="Data file or directory for file sources; for "
                             "`arithmetic` / `logic` a task file (`rlvr data generate`) instead "
                             "of generating.")
    val_path: str | None = Field(None, description="A separate held-out validation file, read "
                                 "as `path` is (`jsonl`, `arithmetic`, `logic`: the task record "
                                 "format): every task of it is validated on, in file order (the "
                                 "first `val_size` when that is set), and training tasks also in "
                                 "it (same id or prompt) are left out. Without it `jsonl`, "
                                 "`math500`, `humaneval` and task files hold `val_size` tasks "
                                 "of `path` out.")
    mixture: str = Field("2d+-2d", description="Generator levels and weights: arithmetic, "
                         "e.g. `2d+-2d:0.6,2dx1d:0.4` (rlvr.tasks.arithmetic.PRESETS; default "
                         "`2d+-2d`); logic, e.g. `countdown-3:0.5,kk-2:0.5` (rlvr.tasks.logic."
                         "LEVELS; default `countdown-3:0.5,kk-3:0.5`); reasoning_gym, datasets "
                         "with generator options and weights, e.g. `countdown(min_numbers=3):"
                         "0.5,knights_knaves(n_people=2):0.5`; verifiers, environment modules "
                         "with their `load_environment` arguments, e.g. `my_env(n=500)` (no "
                         "default).")
    train_mixture: str | None = Field(None, description="Generated sources only: the training "
                                      "problems' levels and weights when they should differ "
                                      "from the validation problems' (`mixture`, which stays "
                                      "the held-out yardstick), e.g. more weight on the kinds "
                                      "the model entering GRPO has yet to learn, where its "
                                      "groups have reward variance. Unset: `mixture`. Train "
                                      "and validation problems stay disjoint either way.")
    train_size: int = Field(2000, ge=1, le=MAX_ROWS, description="Training problems.")
    val_size: int | None = Field(None, ge=1, le=MAX_ROWS,
        description="Validation problems (R28). Unset: 200 (generated sources, gsm8k, mbpp), every "
        "task of `val_path`, or for a hold-out from one file 200 or a fifth of a file of fewer "
        "than 1000 tasks (said when it happens). Set: exactly that many (a hold-out needs a larger "
        "file; the first of `val_path`).")
    instruction: str = Field(DEFAULT_INSTRUCTION, description="Text appended to every "
                             "question in the user turn: asks for the target output format. "
                             "Default: ask for a final `#### <answer>` line; for `humaneval` and "
                             "`mbpp` no tests or example calls in the code block; for `logic` and "
                             "`verifiers` none (their prompts state their own answer format); "
                             "for `reasoning_gym` the answer between `<answer>` tags. Saved with "
                             "every "
                             "checkpoint (`rlvr_prompt.json`), so `rlvr eval` prompts a "
                             "checkpoint as it was trained.")
    one_shot: bool = Field(False, description="Prepend one worked example (a user/assistant "
                           "exchange) to every prompt.")
    max_line_bytes: int = Field(DEFAULT_MAX_LINE_BYTES, ge=1, le=MAX_INPUT_BYTES,
                                description="The longest line (bytes) of a data file: a "
                                "longer one is refused (exit 2, naming the file and line) after "
                                "reading only that much of it, so a huge record cannot exhaust "
                                "memory.")
    max_prompt_chars: int = Field(DEFAULT_MAX_PROMPT_CHARS, ge=1, le=MAX_INPUT_BYTES,
                                  description="The longest prompt (characters) of a data "
                                  "file's task: a longer one is refused (exit 2, naming the file "
                                  "and line).")

    @model_validator(mode="before")
    @classmethod
    def _source_defaults(cls, data):
        # A source's own defaults for the fields left out (logic: its levels, no instruction;
        # code sources: a code instruction).
        if isinstance(data, dict) and is_source(data.get("source")):
            data = dict(data)
            data.setdefault("instruction", default_instruction(data["source"]))
            if not task_source(data["source"]).generated:
                return data
            if task_source(data["source"]).default_mixture is None and "mixture" not in data:
                raise ValueError(f"mixture: data.source {data['source']} has no default; name "
                                 f"what to generate (e.g. an environment module)")
            data.setdefault("mixture", task_source(data["source"]).default_mixture)
        return data

    @field_validator("tier_weights")
    @classmethod
    def _tier_weights_are_weights(cls, weights: dict[str, float]) -> dict[str, float]:
        for tier, weight in weights.items():
            if tier not in ("easy", "medium", "hard"):
                raise ValueError(f"{tier}: not a tier (easy, medium, hard)")
            if not weight >= 0 or weight == float("inf"):
                raise ValueError(f"{tier}: expected a finite weight >= 0, got {weight}")
            if weight > MAX_COEF:
                raise ValueError(f"{tier}: expected a weight <= {MAX_COEF:g}, got {weight:g}")
        if weights and sum(weights.values()) <= 0:
            raise ValueError("every weight is 0: no tier could be drawn")
        return weights

    @field_validator("mixture")
    @classmethod
    def _mixture_of_source(cls, mixture: str, info: ValidationInfo) -> str:
        source = info.data.get("source")
        if source is None or info.data.get("path"):
            return mixture
        return check_mixture(source, mixture)

    @field_validator("train_mixture")
    @classmethod
    def _train_mixture_of_source(cls, mixture: str | None, info: ValidationInfo) -> str | None:
        source = info.data.get("source")
        if mixture is None or source is None:
            return mixture
        if info.data.get("path") or not task_source(source).generated:
            raise ValueError(f"only for a generated source without data.path "
                             f"(data.source is {source}"
                             + (f", data.path {info.data['path']}" if info.data.get("path")
                                else "") + ")")
        return check_mixture(source, mixture)

    def source_config(self, spec: DataSource | None = None) -> DataConfig:
        """The single-source data section that loads ``spec`` (one entry of ``sources``), or
        this section itself for ``None``. ``path`` and ``val_path`` are the entry's own; unset
        sizes come from this section, ``mixture`` from it when it names the same source, else
        the source's default mixture; the instruction as :meth:`instruction_for` gives it."""
        if spec is None:
            return self
        mixture = spec.mixture or (self.mixture if self.source == spec.source
                                   else task_source(spec.source).default_mixture or self.mixture)
        sizes = {k: v for k, v in spec.model_dump().items()
                 if v is not None and k in ("train_size", "val_size")}
        train_mixture = (self.train_mixture if self.source == spec.source and not spec.mixture
                         else None)
        return self.model_copy(update={**sizes, "source": spec.source, "path": spec.path,
                                       "val_path": spec.val_path, "mixture": mixture,
                                       "train_mixture": train_mixture,
                                       "sources": [], "instruction": self.instruction_for(spec)})

    def instruction_for(self, spec: DataSource | None = None) -> str:
        """The instruction of ``spec``'s tasks (``None``: this section's source): the
        source's own ``instruction`` when set, else ``data.instruction`` carried over to the
        source (:func:`carry_instruction`: the default instruction becomes the source's
        default, none for logic)."""
        if spec is None:
            return self.instruction
        if spec.instruction is not None:
            return spec.instruction
        return carry_instruction(self.instruction, self.source, spec.source)

