"""The length tool (R19): the completion-length distribution of a run or a completions file,
the recommended inference cap (P90 of the lengths x 1.2, rounded up) and the truncation rate at
the current cap.

Inputs (:func:`load_lengths`):
- a training run directory: its ``samples.jsonl`` (training completions), the cap
  ``grpo.max_new_tokens`` from its ``config.yaml``; completions without a token count are
  tokenised with the run's model tokenizer (decoded text: a stop token is not counted);
- an ``rlvr eval`` output directory: its ``completions.jsonl`` (``tokens``, ``finish_reason``),
  the cap from ``results.json`` (``settings.max_new_tokens``);
- a JSONL file with ``tokens`` (or ``length``) per line, or ``completion`` text plus
  ``--tokenizer``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from rlvr.io import InputError, jsonl_objects
from rlvr.length_cap import CAP_FACTOR, length_cap, percentile
from rlvr.models.loader import TINY_RANDOM, resolve_model_path
from rlvr.models.tiny import tiny_tokenizer

_LENGTH_FIELDS = ("tokens", "length", "completion_tokens")


class LengthsError(ValueError):
    """The input holds no usable lengths; the message names the file / line / field."""


def recommended_cap(lengths: Sequence[int], factor: float = CAP_FACTOR) -> int:
    """Inference length cap (R19): ``ceil(P90(lengths) * factor)`` tokens
    (:func:`rlvr.length_cap.length_cap`; 37 * 1.2 = 44.4 -> 45 and 50 * 1.2 -> 60)."""
    return length_cap(lengths, 90, factor)


def length_report(lengths: Sequence[int], cap: int | None = None,
                  finish_reasons: Sequence[str | None] | None = None) -> dict:
    """Distribution summary of completion lengths (tokens).

    Returns ``count``, ``mean``, ``min``, ``p50``, ``p90``, ``p99``, ``max``,
    ``recommended_cap`` (:func:`recommended_cap`), ``cap``, ``truncation_rate`` at ``cap``
    (the share of completions that stopped on the cap: finish reason ``"length"`` where every
    completion has one, else length >= cap; None without a cap), and
    ``truncation_rate_at_recommended`` (share with length >= the recommended cap) with
    ``truncation_rate_at_recommended_range`` ``[low, high]``. A completion cut at ``cap`` has
    an unknown length >= ``cap`` (censored data): when some were cut and the recommended cap is
    above ``cap``, the rate at the recommended cap is unknown (None) and only its range is
    given (low: the uncut ones that reach it; high: plus every cut one), and ``censored`` is
    True: the percentiles and the recommendation are then lower bounds.

    Raises:
        LengthsError: no lengths.
    """
    if not lengths:
        raise LengthsError("no completion lengths found")
    n = len(lengths)
    rec = recommended_cap(lengths)
    if cap is None:
        cut = [False] * n
    elif finish_reasons is not None and len(finish_reasons) == n and all(finish_reasons):
        cut = [r == "length" for r in finish_reasons]
    else:
        cut = [x >= cap for x in lengths]
    truncated = None if cap is None else sum(cut) / n
    low = sum(x >= rec and not c for x, c in zip(lengths, cut)) / n
    censored = bool(truncated) and rec > cap
    high = low + sum(cut) / n if censored else sum(x >= rec for x in lengths) / n
    return {"count": n, "mean": sum(lengths) / n, "min": min(lengths),
            "p50": percentile(lengths, 50), "p90": percentile(lengths, 90),
            "p99": percentile(lengths, 99), "max": max(lengths), "recommended_cap": rec,
            "cap": cap, "truncation_rate": truncated,
            "truncation_rate_at_recommended": None if censored else high,
            "truncation_rate_at_recommended_range": [low if censored else high, high],
            "censored": censored}


def histogram(lengths: Sequence[int], bins: int = 10) -> list[tuple[int, int, int]]:
    """``bins`` equal-width bins over [min, max]: ``(low, high, count)`` with inclusive
    integer bounds; every length falls in exactly one bin."""
    lo, hi = min(lengths), max(lengths)
    width = max(1, math.ceil((hi - lo + 1) / bins))
    edges = list(range(lo, hi + 1, width))
    counts = [0] * len(edges)
    for x in lengths:
        counts[(x - lo) // width] += 1
    return [(e, e + width - 1, c) for e, c in zip(edges, counts)]


@dataclass
class Lengths:
    """Lengths read from a run or a file.

    Attributes:
        lengths: tokens per completion.
        cap: the length cap in force (None if unknown).
        finish_reasons: per completion, when recorded.
        source: what was read (for the report).
    """

    lengths: list[int]
    cap: int | None
    finish_reasons: list[str | None]
    source: str


def load_tokenizer(name: str):
    """A tokenizer by model name (``tiny-random``, the default model, a path or hub id)
    without loading the model's weights."""
    if name == TINY_RANDOM:
        return tiny_tokenizer()
    # optional dependency: transformers (rlvr[train]); counting stored `tokens` needs none
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(resolve_model_path(name))


def _rows(path: Path) -> list[tuple[int, dict]]:
    try:
        return jsonl_objects(path)
    except InputError as exc:
        raise LengthsError(str(exc)) from None


def _lengths_of(path: Path, rows, tokenizer_name: str | None) -> list[int]:
    out, tokenizer = [], None
    for line_no, obj in rows:
        value = next((obj[f] for f in _LENGTH_FIELDS if obj.get(f) is not None), None)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise LengthsError(f"{path}:{line_no}: field 'tokens': expected an int >= 0, "
                                   f"got {value!r}")
            out.append(value)
            continue
        text = obj.get("completion")
        if not isinstance(text, str):
            raise LengthsError(f"{path}:{line_no}: expected 'tokens' (int) or 'completion' "
                               "(str)")
        if tokenizer_name is None:
            raise LengthsError(f"{path}:{line_no}: no 'tokens' field; pass --tokenizer MODEL "
                               "to count the completion's tokens")
        tokenizer = tokenizer or load_tokenizer(tokenizer_name)
        out.append(len(tokenizer(text, add_special_tokens=False).input_ids))
    return out


def load_lengths(path: str | Path, *, tokenizer: str | None = None,
                 cap: int | None = None) -> Lengths:
    """Read completion lengths from a run directory, an eval directory or a JSONL file (see
    the module doc); ``tokenizer`` / ``cap`` override what the directory says.

    Raises:
        LengthsError: nothing usable at ``path``; the message says what was expected.
    """
    path = Path(path)
    if not path.exists():
        raise LengthsError(f"{path}: no such file or directory")
    found_cap = None
    if path.is_dir():
        if (path / "completions.jsonl").is_file():
            file = path / "completions.jsonl"
            results = path / "results.json"
            if results.is_file():
                found_cap = json.loads(results.read_text()).get("settings", {}).get(
                    "max_new_tokens")
        elif (path / "samples.jsonl").is_file():
            file = path / "samples.jsonl"
            config_path = path / "config.yaml"
            if config_path.is_file():
                config = yaml.safe_load(config_path.read_text()) or {}
                found_cap = (config.get("grpo") or {}).get("max_new_tokens")
                tokenizer = tokenizer or (config.get("model") or {}).get("name")
        else:
            raise LengthsError(f"{path}: neither a run directory (samples.jsonl) nor an "
                               "rlvr eval directory (completions.jsonl)")
    else:
        file = path
    rows = _rows(file)
    return Lengths(lengths=_lengths_of(file, rows, tokenizer),
                   cap=cap if cap is not None else found_cap,
                   finish_reasons=[obj.get("finish_reason") for _, obj in rows],
                   source=str(file))
