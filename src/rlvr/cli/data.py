"""``rlvr data ...``: the data curation commands (R24-R27, R32). Every command reads and writes
the project's task record format (JSONL, one :class:`rlvr.records.Task` per line; written
atomically). Bad input exits 2 with a message naming the file, line or option."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from rlvr.cli.common import precision_choice
from rlvr.configio import ConfigError, load_config
from rlvr.data.check import check_tasks, summarize_checks
from rlvr.data.dedup import find_contamination, remove_contaminated
from rlvr.data.stratify import histogram, tier
from rlvr.data.stratify import stratify as run_stratify
from rlvr.data.variants import make_variants
from rlvr.eval.sampling import sample_batched
from rlvr.io import OutputError, atomic_write, output_file_problem
from rlvr.limits import (
    MAX_BATCH,
    MAX_GROUP,
    MAX_REPEATS,
    MAX_ROWS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_WORKERS,
)
from rlvr.models.loader import ModelLoadError
from rlvr.rewards.config import RewardConfig
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.registry import VERIFIERS
from rlvr.tasks.config import DataConfig
from rlvr.tasks.registry import generated_names, source_names, task_source
from rlvr.tasks.sources import DataError, load_task_file

data_app = typer.Typer(help="Data curation: convert, generate, check, stratify, dedup, variants.",
                       no_args_is_help=True)
err = Console(stderr=True)


def convertible_names() -> list[str]:
    """The registered task sources whose files ``rlvr data convert`` reads
    (:attr:`rlvr.tasks.registry.TaskSource.convert_splits`), in registration order."""
    return [name for name in source_names() if task_source(name).convert_splits]


def _fail(message: str) -> typer.Exit:
    err.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    return typer.Exit(2)


def _read(path: Path):
    """Tasks of a task JSONL file; exits 2 naming the file and line of a bad record or of a
    task type no verifier is registered for."""
    try:
        tasks = load_task_file(Path(path))
    except DataError as exc:
        raise _fail(str(exc)) from None
    known = set(VERIFIERS.names())
    for line, task in enumerate(tasks, 1):
        if task.task_type not in known:
            raise _fail(f"{path}:{line}: task_type {task.task_type!r} has no verifier; "
                        f"registered: {', '.join(sorted(known))} (add one with reward.plugins)")
    return tasks


def _check_output(path: Path | None, option: str = "--output") -> None:
    """Exit 2 before any work, naming the option and the path, when ``path`` cannot be written
    as a file (a directory, an unwritable directory; a missing directory is created)."""
    if path is not None:
        problem = output_file_problem(path, make_parents=True)
        if problem is not None:
            raise _fail(f"{option} {path}: {problem}")


def write_tasks(path: Path, tasks) -> None:
    """Tasks as JSONL, atomically (temp file, then rename). An OSError while writing (disk
    full) prints one line and exits 1; the file keeps its previous content."""
    try:
        with atomic_write(path) as f:
            for task in tasks:
                f.write(task.to_json() + "\n")
    except OutputError as exc:
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(1) from None


def _pipeline(workers: int):
    return RewardPipeline(RewardConfig(workers=workers))


@data_app.command()
def convert(
    source: str = typer.Argument(..., help=f"One of {', '.join(convertible_names())}."),
    path: Path = typer.Argument(..., help="The source file or its directory."),
    output: Path = typer.Option(..., "--output", "-o", help="Task JSONL to write."),
    split: str | None = typer.Option(None, help="gsm8k: train / test (default test); mbpp: "
                                        "train / validation / test / prompt (default all)."),
) -> None:
    """Convert a GSM8K / MATH-500 / HumanEval / MBPP file into the task record format."""
    convertible = convertible_names()
    if source not in convertible:
        raise _fail(f"source: {source!r} is not one of {', '.join(convertible)}")
    splits = task_source(source).convert_splits
    if split is not None and split not in splits:
        raise _fail(f"--split: {split!r} is not a split of {source} ({', '.join(splits)})")
    _check_output(output)
    try:
        tasks = task_source(source).read(path, split)
    except (DataError, ValueError, OSError) as exc:
        raise _fail(str(exc)) from None
    write_tasks(output, tasks)
    print(f"{len(tasks)} {source} tasks -> {output}")


@data_app.command()
def generate(
    source: str = typer.Argument(..., help=f"{' or '.join(generated_names())}."),
    mixture: str = typer.Option(..., "--mixture", "-m", help="Levels and weights, e.g. "
                                "`2d+-2d` or `countdown-3:0.5,kk-2:0.5`; reasoning_gym: "
                                "datasets with options, `countdown(min_numbers=3):0.5,"
                                "knights_knaves:0.5`; verifiers: environment modules, "
                                "`my_env(n=100)`."),
    n: int = typer.Option(100, "-n", min=1, max=MAX_ROWS, help="Number of tasks."),
    split: str = typer.Option("train", help="train or validation (disjoint problems)."),
    seed: int = typer.Option(0),
    output: Path = typer.Option(..., "--output", "-o"),
) -> None:
    """Generate tasks from a built-in generator (arithmetic levels, logic puzzles,
    reasoning-gym datasets, verifiers environments' rows)."""
    _check_output(output)
    try:
        if source not in generated_names():
            raise _fail(f"source: {source!r} is not {' or '.join(generated_names())}")
        tasks = task_source(source).generate(mixture, n, seed=seed, split=split)
    except (ValueError, KeyError, ImportError) as exc:
        raise _fail(f"--mixture: {exc.args[0] if exc.args else exc}") from None
    write_tasks(output, tasks)
    print(f"{len(tasks)} {source} tasks -> {output}")


@data_app.command()
def check(
    tasks: list[Path] = typer.Option(..., "--tasks", "-t", help="Task JSONL file(s)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the tasks that "
                                          "pass here."),
    workers: int = typer.Option(2, min=1, max=MAX_WORKERS, help="Verifier worker processes."),
) -> None:
    """Every reference must verify against itself, and every worked solution against its
    reference. Prints counts per source and lists the failures; exits 1 if any fail."""
    _check_output(output)
    loaded = [t for path in tasks for t in _read(path)]
    with _pipeline(workers) as rewards:
        checks = check_tasks(loaded, rewards)
    summary = summarize_checks(checks)
    table = Table(title=f"reference checks ({len(loaded)} tasks)")
    for col in ("source", "tasks", "references failed", "solutions failed"):
        table.add_column(col, justify="left" if col == "source" else "right")
    for name, s in summary.items():
        table.add_row(name, str(s.tasks), f"{s.references_failed} / {s.references_checked}",
                      f"{s.solutions_failed} / {s.solutions_checked}")
    Console(width=120).print(table)
    for name, s in summary.items():
        for task_id, detail in s.failures:
            print(f"FAIL {name} {task_id}: {detail}")
    if output is not None:
        write_tasks(output, [t for t, c in zip(loaded, checks) if not c.failed])
    if any(c.failed for c in checks):
        raise typer.Exit(1)


@data_app.command()
def stratify(
    tasks: Path = typer.Option(..., "--tasks", "-t", help="Task JSONL file."),
    model: str = typer.Option("smollm2-135m-instruct", "--model", help="The model to be "
                              "trained (name, checkpoint dir or hub id)."),
    n: int = typer.Option(8, "-n", min=1, max=MAX_GROUP, help="Samples per problem."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the tasks with "
                                          "pass_rate and difficulty here."),
    temperature: float = typer.Option(1.0, min=0.0, max=MAX_TEMPERATURE,
        help="Sampling temperature (the GRPO rollout temperature: the tiers are what training "
        "sees)."),
    max_new_tokens: int = typer.Option(128, min=1, max=MAX_TOKENS),
    easy: float = typer.Option(0.75, help="pass_rate >= this is easy."),
    hard: float = typer.Option(0.25, help="pass_rate <= this is hard."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Run config whose "
                                          "data.instruction / one_shot build the prompts."),
    batch_size: int = typer.Option(16, min=1, max=MAX_BATCH, help="Problems per generation call."),
    seed: int = typer.Option(0),
    precision: str = typer.Option("auto", "--precision", help="Compute precision: auto (bf16 "
                                  "where the CPU computes it natively, else fp32), bf16 or fp32."),
) -> None:
    """Measure each problem's pass rate under the model and label it easy / medium / hard
    (a histogram is printed)."""
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.eval.engine_sampler import load_engine_sampler

    try:
        tier(0.5, easy, hard)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    _check_output(output)
    loaded = _read(tasks)
    data = DataConfig()
    if config is not None:
        # deferred: model stack (torch); keeps `rlvr --help` fast
        from rlvr.train.config import RunConfig

        try:
            data = load_config(RunConfig, config, []).data
        except ConfigError as exc:
            raise _fail(str(exc)) from None
    choice = precision_choice(precision)
    try:
        sampler = load_engine_sampler(model, instruction=data.instruction,
                                      one_shot=data.one_shot, temperature=temperature,
                                      top_p=1.0, max_new_tokens=max_new_tokens, seed=seed,
                                      precision=choice.precision)
    except ModelLoadError as exc:
        raise _fail(f"--model: {exc}") from None
    samples = sample_batched(sampler, loaded, n, seed=seed, batch_size=batch_size,
                             progress=lambda done: err.print(f"sampled {done}/{len(loaded)}"))
    with _pipeline(2) as rewards:
        out = run_stratify(loaded, samples, rewards, easy=easy, hard=hard)
    if output is not None:
        write_tasks(output, out)
    _print_histogram(histogram(out, n), n, len(out))


def _print_histogram(h: dict, n: int, total: int) -> None:
    table = Table(title=f"pass rate over {n} samples ({total} problems, mean "
                        f"{h['mean_pass_rate']:.1%})")
    table.add_column("correct / n", justify="right")
    table.add_column("problems", justify="right")
    table.add_column("", justify="left")
    peak = max(h["by_correct"].values()) or 1
    for k, count in h["by_correct"].items():
        table.add_row(f"{k}/{n}", str(count), "#" * round(40 * count / peak))
    Console(width=120).print(table)
    print("tiers: " + ", ".join(f"{name} {count}" for name, count in h["by_tier"].items()))


@data_app.command()
def dedup(
    train: Path = typer.Option(..., "--train", help="Training task JSONL."),
    evaluation: list[Path] = typer.Option(..., "--eval", help="Evaluation task JSONL file(s)."),
    output: Path | None = typer.Option(None, "--output", "-o", help="Write the training "
                                          "tasks that are not contaminated here."),
    threshold: float = typer.Option(0.25, min=0.0, max=1.0, help="Near-duplicate threshold: "
                                    "Jaccard similarity of word 3-gram shingles with numbers "
                                    "masked (0.25 catches paraphrases; unrelated GSM8K pairs are "
                                    "below 0.17 at the 99th percentile, see rlvr.data.dedup)."),
) -> None:
    """Exact and near-duplicate detection between training and evaluation items;
    reports each contaminated training item with its closest evaluation item."""
    _check_output(output)
    train_tasks = _read(train)
    eval_tasks = [t for path in evaluation for t in _read(path)]
    matches = find_contamination(train_tasks, eval_tasks, threshold=threshold)
    for m in matches:
        print(f"{m.kind} {m.similarity:.2f} train {m.train_id} ~ eval {m.eval_id}\n"
              f"  train: {m.train_text[:160]!r}\n  eval:  {m.eval_text[:160]!r}")
    exact = sum(m.kind == "exact" for m in matches)
    print(f"{len(matches)} of {len(train_tasks)} training items contaminated ({exact} exact, "
          f"{len(matches) - exact} near) against {len(eval_tasks)} evaluation items")
    if output is not None:
        kept = remove_contaminated(train_tasks, matches)
        write_tasks(output, kept)
        print(f"{len(kept)} clean training tasks -> {output}")


@data_app.command()
def variants(
    tasks: Path = typer.Option(..., "--tasks", "-t", help="Task JSONL (GSM8K-style: references "
                               "with <<a*b=c>> calculator annotations and '#### N')."),
    output: Path = typer.Option(..., "--output", "-o"),
    per_task: int = typer.Option(1, min=1, max=MAX_REPEATS, help="Variants per task."),
    seed: int = typer.Option(0),
) -> None:
    """"Similar but different" variants: numbers changed, answers recomputed."""
    _check_output(output)
    made, report = make_variants(_read(tasks), per_task=per_task, seed=seed)
    write_tasks(output, made)
    print(f"{len(made)} variants of {report['tasks_with_variant']} / {report['tasks']} tasks "
          f"-> {output}")
    skipped = sorted(report["skipped"].items(), key=lambda kv: -kv[1])
    if skipped:
        print("skipped (no safely recomputable variant): "
              + ", ".join(f"{reason} {count}" for reason, count in skipped))
