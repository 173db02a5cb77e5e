"""``rlvr eval``: test-time scaling of one or more models (or of completions made elsewhere):
pass@k, maj@k, best-of-k, cost per k, tables and plots."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import typer
from pydantic import ValidationError

from rlvr.cli.common import (
    PRECISION_HELP,
    check_model_name,
    check_output_dir,
    err,
    fail,
    output_errors,
    precision_choice,
    with_plugins,
)
from rlvr.cli.run_checks import recorded_output_dir
from rlvr.configio import ConfigError, load_config
from rlvr.envs.config import EnvConfig
from rlvr.envs.registry import ENVIRONMENTS
from rlvr.eval.data import eval_data_config
from rlvr.eval.endpoint import EndpointError
from rlvr.eval.evaluate import (
    EvalError,
    EvalSettings,
    evaluate_completions,
    evaluate_models,
    load_reranker,
    parse_aggregators,
    parse_ks,
)
from rlvr.eval.prompts import model_prompt, template_differs, wants_saved_prompt
from rlvr.eval.records import read_completions
from rlvr.eval.report import combine, markdown, write_report
from rlvr.eval.sampling import EndpointSampler
from rlvr.eval.summary import SummaryError
from rlvr.io import InputError
from rlvr.limits import (
    MAX_BATCH,
    MAX_GROUP,
    MAX_REPEATS,
    MAX_ROWS,
    MAX_SEED,
    MAX_TEMPERATURE,
    MAX_TIMEOUT_S,
    MAX_TOKENS,
    MAX_WORKERS,
)
from rlvr.models.loader import ModelLoadError
from rlvr.progress import console_phases
from rlvr.rewards.pipeline import RewardPipeline
from rlvr.rewards.registry import VERIFIERS
from rlvr.tasks.prompting import saved_prompt
from rlvr.tasks.registry import generated_names, needs_data_path, source_names
from rlvr.tasks.sources import load_tasks
from rlvr.tools.registry import TOOLS


def _tasks_help() -> str:
    """``--tasks`` help: the registered task sources (:mod:`rlvr.tasks.registry`)."""
    files = [name for name in source_names() if needs_data_path(name)]
    return (f"Task source, as data.source of a run config: {', '.join(generated_names())} "
            "(generated in-process from --mixture, or read from --data-path), "
            f"{', '.join(files)} (read from --data-path).")


# Files only a training run (`rlvr train` / `sft` / `sweep`) writes: `rlvr eval` refuses such a
# directory, whose results.json it would replace.
TRAINING_MARKERS = ("config.yaml", "metrics.jsonl", "sft_results.json", "checkpoints",
                    "sft_model", "sweep.json")


def eval_(
    model: list[str] = typer.Option([], "--model", "-m", help="Model to sample: "
                                    "smollm2-135m-instruct, tiny-random, a checkpoint directory "
                                    "or hub id. Repeat to compare models side by side (same "
                                    "problems, same seeds). With --endpoint: the served name."),
    tasks: str | None = typer.Option(None, "--tasks", "-t", help=_tasks_help()),
    data_path: Path | None = typer.Option(None, "--data-path", help="Data file or "
                                             "directory of file sources (data.path); for "
                                             "arithmetic / logic a task file instead of "
                                             "generating. A file is evaluated whole, every "
                                             "record in file order (--limit: the first N); an "
                                             "MBPP file or a GSM8K directory by its validation "
                                             "split."),
    mixture: str | None = typer.Option(None, "--mixture", help="Generator levels of "
                                          "arithmetic (e.g. 2d+-2d) or logic (e.g. "
                                          "countdown-3:0.5,kk-3:0.5; default "
                                          "countdown-3:0.5,kk-3:0.5); reasoning_gym datasets "
                                          "with options and weights (e.g. "
                                          "'countdown(min_numbers=3):0.5,knights_knaves:0.5'); "
                                          "verifiers environment modules with their "
                                          "arguments (e.g. 'my_env(n=100)') (data.mixture)."),
    split: str = typer.Option("validation", "--split", help="validation (the held-out set "
                              "a training run validates on) or train."),
    limit: int | None = typer.Option(None, "--limit", min=1, max=MAX_ROWS,
        help="Problems to evaluate (sets data.val_size, or train_size with --split train; default: "
        "the config's; with a --data-path file: the first N of it, default all)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Run config YAML: its "
                                          "data, reward, seed and eval.max_new_tokens are the "
                                          "defaults (evaluate on that run's validation set)."),
    completions: Path | None = typer.Option(None, "--completions", help="Score "
                                               "completions produced elsewhere (JSONL: id, "
                                               "task_type, reference, completion[, category, "
                                               "tokens, seconds, model]); no model is loaded."),
    endpoint: str | None = typer.Option(None, "--endpoint", help="Sample from an "
                                           "OpenAI-compatible chat server at this URL instead "
                                           "of a local model."),
    n: int = typer.Option(16, "--n", min=1, max=MAX_GROUP, help="Samples per problem."),
    k: str | None = typer.Option(None, "--k", help="k values, e.g. 1,4,8,16 (default: "
                                    "1, 2, 4, ... up to n)."),
    aggregators: str | None = typer.Option(None, "--aggregators", help="TYPE=NAME,... or "
                                              "NAME for all task types (default math=majority,"
                                              " code=any_passes, others best_of_logprob); "
                                              "names: any_passes, best_of_logprob, "
                                              "best_of_oracle, best_of_reranker, majority."),
    temperature: float = typer.Option(0.7, "--temperature", min=0.0, max=MAX_TEMPERATURE,
                                      help="Eval sampling temperature (0.6-0.8 is usual)."),
    top_p: float = typer.Option(1.0, "--top-p", min=0.0, max=1.0, help="Nucleus sampling: "
                                "keep the smallest set of tokens whose probability reaches it, "
                                "in (0, 1]; 1 keeps every token."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", min=1, max=MAX_TOKENS,
        help="Length cap (default: the config's eval.max_new_tokens, else 256)."),
    seed: int | None = typer.Option(None, "--seed", min=0, max=MAX_SEED,
                                       help="Seeds data, sampling and maj@k "
                                       "subsets (default: the config's seed, else 0)."),
    batch_size: int = typer.Option(16, "--batch-size", min=1, max=MAX_BATCH,
        help="Problems per generation call."),
    timeout: float | None = typer.Option(None, "--timeout", min=0.001, max=MAX_TIMEOUT_S,
        help="Online budget in seconds per problem: sample in chunks, keep what finished in time "
        "(reported as fallback)."),
    chunk: int = typer.Option(4, "--chunk", min=1, max=MAX_GROUP,
        help="Samples per call under --timeout."),
    probe: str | None = typer.Option(None, "--probe", help="sycophancy: also ask each "
                                        "problem with a wrong hint from the user."),
    reranker: str | None = typer.Option(None, "--reranker", help="module:function "
                                           "scoring (prompt, completion) without the reference, "
                                           "for best-of-k."),
    instruction: str | None = typer.Option(None, "--instruction", help="Format "
                                              "instruction after each question (default: "
                                              "--config's data.instruction, else the one "
                                              "saved with a checkpoint by rlvr train, else "
                                              "the task source's default; printed with its "
                                              "origin)."),
    one_shot: bool | None = typer.Option(None, "--one-shot/--no-one-shot", help="Prepend "
                                            "a worked example (default: the config's, else "
                                            "the checkpoint's)."),
    saturation_threshold: float = typer.Option(0.01, "--saturation-threshold", min=0.0, max=1.0,
                                               help="A curve is saturated when k -> 2k gains "
                                               "less than this (accuracy, 0.01 = 1 point)."),
    request_timeout: float = typer.Option(60.0, "--request-timeout", min=0.001, max=MAX_TIMEOUT_S,
        help="Seconds per endpoint request."),
    retries: int = typer.Option(2, "--retries", min=0, max=MAX_REPEATS,
        help="Endpoint retries per request."),
    concurrency: int = typer.Option(4, "--concurrency", min=1, max=MAX_WORKERS,
        help="Endpoint requests in flight."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, max=MAX_WORKERS,
        help="Verifier processes."),
    plugins: list[str] = typer.Option([], "--plugins", help="Python module registering task "
                                      "types (@register_verifier), format rules or "
                                      "aggregators, imported here and in every verifier "
                                      "process: reward.plugins of a run config (added to "
                                      "--config's). Repeatable or comma-separated; a module in "
                                      "the working directory imports by name."),
    env: str | None = typer.Option(None, "--env", help="Play episodes of this environment "
                                      f"(env.name of a run config, {ENVIRONMENTS.one_of()}, "
                                      "or one a "
                                      "--plugins module registers) and report pass@k / maj@k "
                                      "over episodes; default: --config's env section, else "
                                      "single-turn completions. Local --model only."),
    tools: str | None = typer.Option(None, "--tools", help="Tools the environment offers, "
                                        f"comma-separated (env.tools, each {TOOLS.one_of()}; "
                                        "default: --config's, else calculator,python)."),
    max_turns: int | None = typer.Option(None, "--max-turns", min=1, max=MAX_REPEATS,
        help="Most assistant turns per episode (env.max_turns; default: --config's, else 4)."),
    precision: str = typer.Option("auto", "--precision", help=PRECISION_HELP),
    output_dir: Path | None = typer.Option(None, "-o", "--output-dir", help="Output "
                                              "directory (default runs/eval-<tasks>-<time>)."),
) -> None:
    """Test-time scaling: n samples per problem -> pass@k, maj@k, best-of-k, cost per k,
    per-category tables and plots (DIR/results.json, results.md, completions.jsonl, *.png).
    With --env (or a --config with an env section) each sample is a multi-turn episode."""
    if completions is not None and (model or tasks or endpoint):
        raise fail("--completions: give either a completions file or --model/--endpoint with "
                   "--tasks, not both")
    if completions is None and not model and not endpoint:
        raise fail("give --model M (or --endpoint URL) with --tasks T, or --completions FILE")
    if probe is not None and completions is not None:
        raise fail("--probe needs a model to ask; it does not apply to --completions")
    if top_p <= 0.0:
        raise fail(f"--top-p: expected a value in (0, 1], got {top_p} (0 keeps no token)")
    if temperature == 0.0 and n > 1 and completions is None:
        err.print(f"warning: --temperature 0 is greedy decoding: the --n {n} samples of a "
                  f"problem are identical, so pass@k and maj@k equal pass@1 (sample with "
                  f"--temperature > 0, e.g. 0.7)")
    run_config = _load_run_config_for_eval(config)
    reward_config = _eval_reward_config(run_config, plugins, workers)
    env_config = _eval_env_config(run_config, env, tools, max_turns)
    if env_config is not None and (completions is not None or endpoint is not None):
        raise fail("--env: episodes are played by a local --model (their trained tokens are the "
                   "sampled ids); it does not apply to --completions or --endpoint")
    default_out = output_dir is None
    if default_out:  # named now, so that it is checked before any work
        label = completions.name if completions is not None else tasks or run_config.data.source
        output_dir = Path("runs") / f"eval-{label}-{datetime.now():%Y%m%d-%H%M%S}"
    check_output_dir(output_dir, "the default output directory" if default_out
                     else "--output-dir")
    held = [name for name in TRAINING_MARKERS if (output_dir / name).exists()]
    if held:  # its results.json is the run's own (baseline vs trained, gain CI)
        raise fail(f"--output-dir {output_dir}: holds a training run ({', '.join(held)}); "
                   f"this evaluation's results.json would replace the run's: choose another "
                   f"--output-dir, e.g. {output_dir / 'eval'}")
    try:
        agg = parse_aggregators(aggregators)
        ks = None if completions is not None else parse_ks(k, n)
        rerank = load_reranker(reranker) if reranker else None
    except EvalError as exc:
        raise fail(str(exc)) from None
    seed = run_config.seed if seed is None else seed
    settings = EvalSettings(
        n=n, ks=ks, temperature=temperature, top_p=top_p,
        max_new_tokens=max_new_tokens or (run_config.eval.max_new_tokens if config else 256),
        seed=seed, batch_size=batch_size, aggregators=agg, timeout_s=timeout, chunk=chunk,
        probe=probe, saturation_threshold=saturation_threshold)
    if completions is None and endpoint is None:  # local models: sampled here
        settings.precision = precision_choice(precision).precision
    start = time.perf_counter()
    if completions is not None:
        summaries, rows = _eval_completions(completions, settings, reward_config, k, rerank)
        settings.tasks, settings.temperature, settings.top_p = completions.name, None, None
        first = summaries[next(iter(summaries))]
        settings.max_new_tokens, settings.n, settings.ks = (None, first["samples_per_problem"],
                                                            first["ks"])
    else:
        data = _eval_data_config(run_config, tasks, data_path, mixture, split, limit,
                                 instruction, one_shot)
        settings.tasks = data.source
        prompts = _model_prompts(model or [endpoint], data, instruction, one_shot, config)
        settings.extra = {"data": data.model_dump(mode="json"), "split": split,
                          "endpoint": endpoint, "models": model,
                          **({} if env_config is None
                             else {"env": env_config.model_dump(mode="json")}),
                          "prompts": {name: {k: v for k, v in p.items() if k != "saved"}
                                      for name, p in prompts.items()}}
        summaries, rows = _eval_models(model, endpoint, data, split, settings, reward_config,
                                       rerank, (request_timeout, retries, concurrency), prompts,
                                       env_config)
    results = combine(summaries, settings.as_dict(), time.perf_counter() - start)
    out = output_dir
    with output_errors(), recorded_output_dir(out, "--output-dir"):
        written = write_report(results, out, rows)
    print(markdown(results))
    err.print(f"wrote {', '.join(p.name for p in written)} to {out}", highlight=False)


def _load_run_config_for_eval(config: Path | None):
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.train.config import RunConfig

    try:
        return load_config(RunConfig, config, [])
    except ConfigError as exc:
        raise fail(str(exc)) from None


def _eval_reward_config(run_config, plugins: list[str], workers: int):
    """The run config's reward section with ``--workers`` and the ``--plugins`` modules added
    (:func:`rlvr.cli.common.with_plugins`)."""
    return with_plugins(run_config.reward.model_copy(update={"workers": workers}), plugins)


def _eval_env_config(run_config, env: str | None, tools: str | None,
                     max_turns: int | None):
    """The :class:`rlvr.envs.EnvConfig` episodes are played with: ``--config``'s ``env``
    section with ``--env`` / ``--tools`` / ``--max-turns`` over it (a different ``--env`` name
    starts from that environment's defaults), or ``None`` (single-turn completions). Bad
    values exit 2 naming the option."""
    base = run_config.env
    if env is None and base is None:
        if tools is not None or max_turns is not None:
            raise fail(f"{'--tools' if tools is not None else '--max-turns'}: needs --env NAME "
                       "(or a --config with an env section)")
        return None
    fields = base.model_dump() if base is not None and env in (None, base.name) else {}
    if env is not None:
        fields["name"] = env
    if tools is not None:
        fields["tools"] = [t.strip() for t in tools.split(",") if t.strip()]
    if max_turns is not None:
        fields["max_turns"] = max_turns
    try:
        return EnvConfig(**fields)
    except ValidationError as exc:
        problem = exc.errors()[0]
        message = str(problem["msg"]).removeprefix("Value error, ")
        option = {"name": "--env", "tools": "--tools", "max_turns": "--max-turns"}
        field = message.split(":", 1)[0] if not problem["loc"] else str(problem["loc"][0])
        raise fail(f"{option.get(field, '--env')}: {message}") from None


def _eval_data_config(run_config, tasks, data_path, mixture, split, limit, instruction,
                      one_shot):
    """The DataConfig ``rlvr eval`` loads (:func:`rlvr.eval.data.eval_data_config`); bad values
    exit 2 naming the option."""
    try:
        return eval_data_config(run_config.data, tasks=tasks, data_path=data_path,
                                mixture=mixture, split=split, limit=limit,
                                instruction=instruction, one_shot=one_shot)
    except EvalError as exc:
        raise fail(str(exc)) from None


def _model_prompts(models, data, instruction, one_shot, config) -> dict[str, dict]:
    """How each model is prompted (:func:`rlvr.eval.prompts.model_prompt`), printed with where
    it came from; unreadable saved prompt settings exit 2 naming the model.

    Returns:
        model -> ``{"instruction", "one_shot", "from", "saved"}`` (``saved``: the
        :class:`rlvr.tasks.prompting.SavedPrompt` used, or ``None``).
    """
    out = {}
    for name in models:
        saved = None
        if wants_saved_prompt(config, instruction, one_shot):
            try:
                saved = saved_prompt(name)
            except ValueError as exc:
                raise fail(f"--model {name}: {exc}") from None
        out[name] = prompt = model_prompt(name, data, instruction=instruction,
                                          one_shot=one_shot, config=config, saved=saved)
        text, shot = prompt["instruction"], prompt["one_shot"]
        err.print(f"instruction for {name}: {text!r}" + (" (none)" if not text else "")
                  + f"{'; one-shot example' if shot else ''} ({prompt['from']})",
                  highlight=False, soft_wrap=True)
    return out


def _checked_template(sampler, name: str, saved) -> object:
    """``sampler``, after a warning when its tokenizer's chat template is not the one the model
    was trained with (:func:`rlvr.eval.prompts.template_differs`)."""
    if template_differs(sampler.tokenizer, saved):
        err.print(f"[yellow]warning:[/] {name}: the tokenizer's chat template differs from the "
                  f"one it was trained with ({saved.origin})", highlight=False)
    return sampler


def _eval_models(models, endpoint, data, split, settings, reward_config, rerank, http,
                 prompts, env_config=None):
    # deferred: model stack (torch); keeps `rlvr --help` fast
    from rlvr.eval.engine_sampler import load_engine_sampler

    if endpoint is None:
        for name in models:
            check_model_name(name, "--model")
    try:
        train, val = load_tasks(data, settings.seed,
                                log=lambda m: err.print(m, highlight=False, soft_wrap=True),
                                known_types=VERIFIERS.names())
    except ValueError as exc:
        raise fail(f"--tasks {data.source}: {exc}") from None
    task_list = val if split == "validation" else train
    common = dict(temperature=settings.temperature, top_p=settings.top_p,
                  max_new_tokens=settings.max_new_tokens)

    def prompt(name):
        return {"instruction": prompts[name]["instruction"],
                "one_shot": prompts[name]["one_shot"]}

    # the pipeline scoring every sample; an environment scores its episodes with it too
    holder = {}
    if endpoint is not None:
        timeout_s, retries, concurrency = http
        labels = models or [None]
        factories = {label or endpoint: (lambda label=label: EndpointSampler(
            endpoint, model=label, timeout_s=timeout_s, retries=retries,
            concurrency=concurrency, **prompt(label or endpoint), **common)) for label in labels}
    else:
        factories = {name: (lambda name=name: _checked_template(load_engine_sampler(
            name, seed=settings.seed, precision=settings.precision, env=env_config,
            rewards=holder.get("rewards"), **prompt(name), **common),
            name, prompts[name]["saved"])) for name in models}
    episodes = "" if env_config is None else f", episodes of env {env_config.name}"
    err.print(f"[bold]rlvr eval[/] {len(task_list)} {data.source} problems ({split}), "
              f"n = {settings.n}, temperature {settings.temperature}{episodes}", highlight=False)
    try:
        with RewardPipeline(reward_config) as rewards:
            holder["rewards"] = rewards
            return evaluate_models(factories, task_list, settings, rewards, reranker=rerank,
                                   has_logprobs=endpoint is None,
                                   log=lambda m: err.print(m, highlight=False, soft_wrap=True),
                                   phase=console_phases(err))
    except (EvalError, SummaryError) as exc:
        raise fail(str(exc)) from None
    except ModelLoadError as exc:
        raise fail(f"--model: {exc}") from None
    except ImportError as exc:
        raise fail(str(exc), code=1) from None
    except RuntimeError as exc:  # a server that cannot be reached or answers errors
        if isinstance(exc, EndpointError):
            raise fail(f"--endpoint: {exc}", code=1) from None
        raise


def _eval_completions(path, settings, reward_config, ks_text, rerank):
    try:
        data = read_completions(path)
    except InputError as exc:
        raise fail(str(exc)) from None
    except OSError as exc:
        raise fail(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        with RewardPipeline(reward_config) as rewards:
            return evaluate_completions(data, settings, rewards, ks_text=ks_text,
                                        reranker=rerank, phase=console_phases(err))
    except (EvalError, SummaryError) as exc:
        raise fail(str(exc)) from None
