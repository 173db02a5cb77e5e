"""Sample from a local model through a rollout engine (R29): :class:`EngineSampler`, one
``engine.generate`` call per sampler call, chat prompts built by
:func:`rlvr.tasks.prompting.prompt_ids`; :func:`load_engine_sampler` loads a model (or a
checkpoint) into one, and :func:`sampled_pass_at_k` is the trainer's sampled pass@k.

Its own module because it needs torch (through :mod:`rlvr.rollout`): the samplers of
:mod:`rlvr.eval.sampling`, and ``rlvr eval --completions`` / ``--endpoint``, do not.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rlvr.envs.registry import make_env
from rlvr.envs.runner import EpisodeRunner
from rlvr.eval.episode_sampler import EpisodeSampler
from rlvr.eval.records import score_problems
from rlvr.eval.sampling import sample_batched, task_meta
from rlvr.eval.summary import summarize
from rlvr.models import load_model_and_tokenizer
from rlvr.models.inference import load_for_inference
from rlvr.records import Generated, Task
from rlvr.rollout import SamplingParams, create_auto_engine
from rlvr.tasks.prompting import chat_messages, prompt_ids, stop_token_ids


def generated_from_output(out, tokenizer, n: int, seconds: float) -> list[list[Generated]]:
    """Decode a :class:`rlvr.rollout.RolloutOutput` into ``n`` :class:`Generated` per prompt.

    ``seconds`` (the call's wall time) is split evenly over its rows; ``mean_logprob`` is the
    mean of the row's recorded log-probs (nats / token under the tempered sampling policy).
    """
    rows = out.num_rows
    per_row = seconds / rows if rows else 0.0
    flat = []
    for row in range(rows):
        length = int(out.lengths[row])
        ids = out.completion(row)
        mean_lp = float(out.logprobs[row, :length].float().mean()) if length else 0.0
        flat.append(Generated(text=tokenizer.decode(ids, skip_special_tokens=True),
                              tokens=length, seconds=per_row,
                              finish_reason=out.finish_reason[row], mean_logprob=mean_lp))
    return [flat[i:i + n] for i in range(0, rows, n)]


@dataclass
class EngineSampler:
    """Samples from a local model through a rollout engine.

    Attributes:
        engine: a rollout engine (``create_engine(...)``).
        tokenizer: the model's tokenizer (decodes completions).
        prompt_fn: task -> prompt token ids (the chat-formatted prompt).
        temperature, top_p, max_new_tokens: sampling settings (R18).
        stop_token_ids: ids that end a completion.
    """

    engine: object
    tokenizer: object
    prompt_fn: Callable[[Task], list[int]]
    temperature: float = 0.7
    top_p: float = 1.0
    max_new_tokens: int = 256
    stop_token_ids: tuple[int, ...] = field(default_factory=tuple)

    def sample(self, tasks: Sequence[Task], n: int, seed: int) -> list[list[Generated]]:
        """``n`` completions per task in one ``engine.generate`` call (seeded with ``seed``)."""
        params = SamplingParams(temperature=self.temperature, top_p=self.top_p,
                                max_new_tokens=self.max_new_tokens,
                                stop_token_ids=self.stop_token_ids, n=n, seed=seed)
        start = time.perf_counter()
        out = self.engine.generate([self.prompt_fn(t) for t in tasks], params)
        return generated_from_output(out, self.tokenizer, n, time.perf_counter() - start)


def load_engine_sampler(model_name: str, *, instruction: str, one_shot: bool,
                        temperature: float, top_p: float, max_new_tokens: int, seed: int = 0,
                        engine: str = "auto", precision: str = "auto", env=None,
                        rewards=None) -> EngineSampler | EpisodeSampler:
    """Load ``model_name`` (``rlvr.models.load_model_and_tokenizer``: the default model,
    ``tiny-random``, a local checkpoint directory or a hub id; a LoRA adapter checkpoint is
    merged onto its run's base model by :func:`rlvr.models.inference.load_for_inference`) into
    a rollout engine. ``seed`` seeds ``tiny-random``'s weights, as in training.
    ``engine="auto"`` uses the fast ``torch`` engine and falls back to ``hf`` (transformers
    ``generate``) for architectures the torch engine does not run. ``precision`` (``auto`` /
    ``bf16`` / ``fp32``, :mod:`rlvr.models.precision`) sets the engine's compute dtype.
    With ``env`` (an :class:`rlvr.envs.EnvConfig`) the sampler plays episodes of that
    environment (:class:`rlvr.eval.episode_sampler.EpisodeSampler`, ``max_new_tokens`` per
    turn), which scores them with ``rewards`` (required then).

    Raises:
        rlvr.models.loader.ModelLoadError: the model does not load.
        ValueError: an unknown precision.
    """
    if (Path(model_name) / "adapter_config.json").is_file():
        model, tokenizer = load_for_inference(model_name)
    else:
        model, tokenizer = load_model_and_tokenizer(model_name, seed=seed)
    model.eval()
    rollout = create_auto_engine(engine, model, pad_token_id=tokenizer.pad_token_id,
                                 precision=precision)
    if env is not None:
        if rewards is None:
            raise ValueError("load_engine_sampler: env needs the reward pipeline (rewards=)")
        runner = EpisodeRunner(make_env(env, rewards), tokenizer,
                               lambda task: chat_messages(task, instruction, one_shot))
        return EpisodeSampler(rollout, runner, temperature=temperature, top_p=top_p,
                              max_new_tokens=max_new_tokens,
                              stop_token_ids=stop_token_ids(tokenizer))
    return EngineSampler(
        engine=rollout,
        tokenizer=tokenizer,
        prompt_fn=lambda task: prompt_ids(tokenizer, task, instruction, one_shot),
        temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
        stop_token_ids=stop_token_ids(tokenizer))


def sampled_pass_at_k(engine, tokenizer, tasks: Sequence[Task], prompts: Sequence[list[int]],
                      rewards, *, n: int, ks: Sequence[int], temperature: float,
                      max_new_tokens: int, stop_token_ids: tuple[int, ...], batch_size: int,
                      seed: int, top_p: float = 1.0,
                      progress: Callable[[int], None] | None = None,
                      runner: EpisodeRunner | None = None) -> dict:
    """Sampled pass@k and maj@k of the engine's current weights on ``tasks`` (the trainer's
    validation set, R28/R29): n samples per problem at ``temperature``, one
    ``engine.generate`` per ``batch_size`` prompts, scored with ``rewards``.
    ``progress(n)`` is called with the problems sampled so far after each call. With
    ``runner`` (a run's ``env`` section) the samples are episodes
    (:class:`rlvr.eval.episode_sampler.EpisodeSampler`; ``prompts`` unused, the runner's
    environment scores with its own pipeline, which should be ``rewards``).

    Returns:
        ``{"n", "temperature", "problems", "pass@k", "maj@k", "ci95", "correct_counts",
        "samples", "verifier_errors", "measured", "tokens_per_problem", "seconds"}``; the
        curves map k (str) to a mean in [0, 1], ``correct_counts`` lists c per problem (so
        pass@k can be recomputed), ``verifier_errors`` counts the samples whose verifier
        failed (counted wrong) and ``measured`` is ``False`` when they are at least half
        (:func:`rlvr.eval.summary.summarize`).
    """
    start = time.perf_counter()
    by_id = {t.id: p for t, p in zip(tasks, prompts)}
    if runner is not None:
        sampler = EpisodeSampler(engine, runner, temperature=temperature, top_p=top_p,
                                 max_new_tokens=max_new_tokens, stop_token_ids=stop_token_ids)
    else:
        sampler = EngineSampler(engine, tokenizer, prompt_fn=lambda t: by_id[t.id],
                                temperature=temperature, top_p=top_p,
                                max_new_tokens=max_new_tokens, stop_token_ids=stop_token_ids)
    generated = sample_batched(sampler, tasks, n, seed=seed, batch_size=batch_size,
                               progress=progress)
    problems = score_problems(rewards, [task_meta(t) for t in tasks], generated)
    ks = sorted({k for k in ks if k <= n})
    summary = summarize(problems, ks, seed=seed)
    return {"n": n, "temperature": temperature, "problems": len(problems),
            "pass@k": summary["pass@k"], "maj@k": summary["maj@k"],
            "ci95": {m: summary["ci95"][m] for m in ("pass@k", "maj@k")},
            "correct_counts": [sum(s.correct for s in p.samples) for p in problems],
            "samples": summary["samples"], "verifier_errors": summary["verifier_errors"],
            "measured": summary["measured"],
            "tokens_per_problem": summary["cost"][str(max(ks))]["tokens_per_problem"],
            "seconds": time.perf_counter() - start}
