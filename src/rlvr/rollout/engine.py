"""The rollout engine protocol, the engine registry, and helpers every engine shares.

An engine turns prompt token ids into sampled completions (:class:`RolloutOutput`). Engines are
registered by name (``hf``, ``torch``; ``vllm`` lives elsewhere) and built with
:func:`create_engine`::

    engine = create_engine("torch", model, pad_token_id=tokenizer.pad_token_id)
    out = engine.generate(prompt_ids, SamplingParams(temperature=1.2, top_p=0.9, n=8, seed=0))

Weights: the CPU engines keep a reference to the live policy model (the trainer's object), so a
policy update is visible to the next ``generate``. Engines that keep their own copy (the
``torch`` engine's bf16 weights, the ``hf`` engine with a ``dtype``) refresh it automatically
when the model's parameters changed in place (detected through tensor version counters), and
``update_weights`` forces a refresh or loads a ``state_dict`` / another model's weights.
A LoRA policy (peft) is sampled by the ``torch`` engine itself (:func:`samples_lora`); the
others are given a plain merged copy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from rlvr.models.precision import resolve_precision
from rlvr.registry import Registry
from rlvr.rollout.decoder.support import UnsupportedModelError
from rlvr.rollout.reported_logprobs import ReportBuffers
from rlvr.rollout.types import (
    FINISH_LENGTH,
    FINISH_STOP,
    RolloutOutput,
    RolloutTiming,
    SamplingParams,
)


@runtime_checkable
class RolloutEngine(Protocol):
    """What the trainer calls. See :mod:`rlvr.rollout.types` for the output conventions."""

    name: str

    def generate(self, prompt_ids: Sequence[Sequence[int]],
                 params: SamplingParams) -> RolloutOutput:
        """Sample ``params.n`` completions for each prompt (token ids, no padding).

        Raises:
            ValueError: empty prompt list, an empty prompt, or a token id out of the vocabulary.
        """
        ...

    def update_weights(self, source: Any = None) -> None:
        """Make the next ``generate`` use new policy weights: ``None`` re-reads the live model,
        a ``Mapping`` is loaded as a ``state_dict``, an ``nn.Module`` is copied from."""
        ...


EngineFactory = Callable[..., RolloutEngine]


class UnknownEngineError(ValueError):
    """No engine is registered under the requested name; the message lists the known ones."""


@dataclass(frozen=True)
class EngineMeta:
    """What a rollout engine records beside its factory.

    Attributes:
        device: where it runs, ``cpu`` or ``cuda``: the run's ``model.precision`` resolves
            against it (:func:`create_engine`).
    """

    device: str = "cpu"


#: Engine factories ``factory(model, pad_token_id=..., **options) -> RolloutEngine`` by name;
#: the built-ins register when :mod:`rlvr.rollout` imports their modules.
ENGINES: Registry[EngineFactory, EngineMeta] = Registry(
    "rollout engine", EngineMeta, field="rollout.engine", error=UnknownEngineError)


def register_engine(name: str, *, device: str = "cpu") -> Callable[[EngineFactory],
                                                                    EngineFactory]:
    """Decorator: register an engine factory (usually the engine class) under ``name``.

    The factory is called as ``factory(model, pad_token_id=..., **options)``.

    Args:
        device: :attr:`EngineMeta.device`.

    Raises:
        ValueError: another factory is already registered under ``name``.
    """
    return ENGINES.register(name, device=device)


def engine_names() -> list[str]:
    """Registered engine names, sorted."""
    return ENGINES.names()


def create_engine(name: str, model, *, pad_token_id: int | None = None,
                  precision: str | None = None, **options) -> RolloutEngine:
    """Build the engine registered as ``name`` over ``model`` (a transformers causal LM).

    Args:
        name: registry name, e.g. ``"torch"`` or ``"hf"``.
        model: the policy model; CPU engines keep a reference to it (see the module doc).
        pad_token_id: id used to right-pad completions; default ``model.config.pad_token_id``,
            then its ``eos_token_id``, then 0.
        precision: ``auto`` / ``bf16`` / ``fp32`` (:mod:`rlvr.models.precision`), resolved
            against the engine's registered device (:attr:`EngineMeta.device`) and passed
            as the engine's ``dtype`` option (a ``torch.dtype``); None
            leaves the engine's own default. An explicit ``dtype`` option wins.
        options: engine-specific keyword options (see each engine's class doc).

    Raises:
        UnknownEngineError: ``name`` is not registered (the message suggests the closest name).
        ValueError: an unknown precision.
    """
    entry = ENGINES.entry(name)
    factory = entry.obj
    if precision is not None and "dtype" not in options:
        try:
            options["dtype"] = resolve_precision(precision, device=entry.meta.device).dtype
        except RuntimeError:  # no such device here: the engine's own check says so
            pass
    return factory(model, pad_token_id=pad_token_id, **options)


def create_auto_engine(name: str, model, *, pad_token_id: int | None = None,
                       precision: str | None = None, log: Callable[[str], None] | None = None
                       ) -> RolloutEngine:
    """:func:`create_engine`, where ``name="auto"`` means the fast ``torch`` engine, falling
    back to ``hf`` (transformers ``generate``) for architectures it does not run (``log`` is
    told why). Used by ``rlvr eval``, ``rlvr serve`` and ``rlvr data stratify``.

    Raises:
        UnknownEngineError: ``name`` is neither ``auto`` nor registered.
        UnsupportedModelError: ``name="torch"`` and the model is not Llama-family.
    """
    if name != "auto":
        return create_engine(name, model, pad_token_id=pad_token_id, precision=precision)
    try:
        return create_engine("torch", model, pad_token_id=pad_token_id, precision=precision)
    except UnsupportedModelError as exc:
        if log is not None:
            log(f"torch engine refused the model ({exc}); using engine 'hf'")
        return create_engine("hf", model, pad_token_id=pad_token_id, precision=precision)


# ---------------------------------------------------------------------------------------------
# Shared helpers
# ---------------------------------------------------------------------------------------------


def default_pad_token_id(model, pad_token_id: int | None) -> int:
    """``pad_token_id`` if given, else the model config's pad id, else its first eos id, else 0."""
    if pad_token_id is not None:
        return int(pad_token_id)
    config = getattr(model, "config", None)
    for attr in ("pad_token_id", "eos_token_id"):
        value = getattr(config, attr, None)
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if value is not None:
            return int(value)
    return 0


def check_prompts(prompt_ids: Sequence[Sequence[int]], vocab_size: int) -> list[list[int]]:
    """Validate prompts and return them as lists of ints.

    Raises:
        ValueError: no prompts, an empty prompt, or an id outside ``[0, vocab_size)``; the
            message names the prompt index.
    """
    if isinstance(prompt_ids, Tensor):
        prompt_ids = prompt_ids.tolist()
    prompts = [list(map(int, p)) for p in prompt_ids]
    if not prompts:
        raise ValueError("prompt_ids is empty: give at least one prompt")
    for i, prompt in enumerate(prompts):
        if not prompt:
            raise ValueError(f"prompt_ids[{i}] is empty")
        bad = [t for t in prompt if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"prompt_ids[{i}] has token id {bad[0]} outside [0, {vocab_size})")
    return prompts


def left_pad(prompts: list[list[int]], pad_token_id: int) -> tuple[Tensor, Tensor]:
    """Left-pad prompts to a common length.

    Returns:
        ``(input_ids LongTensor[B, L], attention_mask BoolTensor[B, L])`` with
        ``L = max(len(p))``; the mask is True on real tokens.
    """
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.bool)
    for i, prompt in enumerate(prompts):
        ids[i, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long)
        mask[i, width - len(prompt):] = True
    return ids, mask


def first_stop_lengths(tokens: Tensor, stop_token_ids: Sequence[int]) -> tuple[Tensor, Tensor]:
    """Completion lengths of right-aligned generation output, cut after the first stop token.

    Args:
        tokens: LongTensor[N, T] generated tokens (anything after a stop token is ignored).
        stop_token_ids: ids that end a completion.

    Returns:
        ``(lengths LongTensor[N], stopped BoolTensor[N])``: length includes the stop token;
        ``stopped`` is True where a stop token occurred.
    """
    n, t = tokens.shape
    if not stop_token_ids or t == 0:
        return torch.full((n,), t, dtype=torch.long), torch.zeros(n, dtype=torch.bool)
    is_stop = torch.isin(tokens, torch.tensor(list(stop_token_ids), dtype=tokens.dtype))
    stopped = is_stop.any(dim=1)
    first = is_stop.to(torch.int8).argmax(dim=1)
    lengths = torch.where(stopped, first + 1, torch.full_like(first, t))
    return lengths, stopped


def build_output(
    tokens: Tensor,
    logprobs: Tensor,
    lengths: Tensor,
    stopped: Tensor,
    n: int,
    pad_token_id: int,
    timing: RolloutTiming,
    report: ReportBuffers | None = None,
) -> RolloutOutput:
    """Assemble a :class:`RolloutOutput`: trim to ``max(lengths)``, pad and mask past each length.

    Args:
        tokens: LongTensor[N, T'] with T' >= max(lengths); rows in output order.
        logprobs: FloatTensor[N, T'].
        lengths: LongTensor[N] completion lengths (tokens).
        stopped: BoolTensor[N], True for finish reason ``"stop"``.
        n: samples per prompt (``prompt_index = row // n``).
        pad_token_id: written past each length.
        timing: its ``tokens_generated`` is set to ``lengths.sum()``.
        report: the reported log-probs recorded beside the samples (same rows and steps), or
            None (``SamplingParams.reports_logprobs`` was False).
    """
    width = int(lengths.max()) if lengths.numel() else 0
    mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)
    ids = tokens[:, :width].masked_fill(~mask, pad_token_id)
    lps = logprobs[:, :width].float().masked_fill(~mask, 0.0)
    timing.tokens_generated = int(lengths.sum())
    return RolloutOutput(
        completion_ids=ids.long(),
        completion_mask=mask,
        logprobs=lps,
        prompt_index=torch.arange(tokens.shape[0]) // n,
        finish_reason=[FINISH_STOP if s else FINISH_LENGTH for s in stopped.tolist()],
        lengths=lengths.long(),
        timing=timing,
        pad_token_id=pad_token_id,
        **(report.output_fields(width, mask) if report is not None else {}),
    )


def samples_lora(engine) -> bool:
    """Whether ``engine`` (an engine, or the factory registered for it) samples a peft LoRA
    model given as its model itself, merging each layer's adapters as it snapshots the weights
    (its class attribute ``samples_lora``: the ``torch`` engine). The others (``hf``,
    ``vllm``, Ray's actors) run a plain module: a LoRA policy reaches them as a merged copy or
    merged weights (:func:`rlvr.models.lora.merged_state_dict`)."""
    return bool(getattr(engine, "samples_lora", False))


def params_version(model) -> int:
    """Sum of the parameters' version counters: changes whenever a parameter is modified in
    place (optimizer steps, ``load_state_dict``, ``copy_``), so a cached copy knows it is stale."""
    return sum(p._version for p in model.parameters())


def as_state_dict(source: Any) -> Mapping:
    """The ``state_dict`` of an ``nn.Module``, or ``source`` itself if it is a mapping: what an
    engine's ``update_weights`` accepts.

    Raises:
        TypeError: ``source`` is neither.
    """
    if isinstance(source, torch.nn.Module):
        source = source.state_dict()
    if not isinstance(source, Mapping):
        raise TypeError(f"update_weights takes None, a state_dict or an nn.Module, "
                        f"not {type(source).__name__}")
    return source


def load_weights_into(model, source: Any) -> None:
    """Copy weights into ``model`` from a ``state_dict`` mapping or another ``nn.Module``.

    Raises:
        TypeError: ``source`` is neither.
    """
    with torch.no_grad():
        model.load_state_dict(as_state_dict(source))
