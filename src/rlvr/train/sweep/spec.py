"""The sweep spec: ``--set`` overrides with top-level commas -> the sweep's variants
(:func:`parse_sweep`), their directory names (:func:`variant_name`) and their validated run
configs (:func:`build_configs`)."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from pathlib import Path

from rlvr.configio import ConfigError, load_config, parse_override
from rlvr.train.config import RunConfig

MAX_VARIANTS = 32
NAME_MAX = 120  # longer variant names are shortened and made unique with a hash
_UNSAFE = re.compile(r"[^A-Za-z0-9._=,+-]")


class SweepError(ConfigError):
    """A sweep that cannot run as given: a malformed or conflicting axis, too many variants,
    a variant whose config does not validate, or an output directory holding other runs.
    The CLI exits 2 with the message."""


def split_top_level(value: str) -> list[str]:
    """``value`` split at the commas outside brackets, braces, parentheses and quotes:
    ``"0.1,0.2"`` -> ``["0.1", "0.2"]``; ``"[a,b]"``, ``"{x: 1, y: 2}"`` and ``"'a,b'"`` stay
    whole; ``"[a,b],[c]"`` -> ``["[a,b]", "[c]"]``. Parts are not stripped."""
    parts, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(value):
        ch = value[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1  # skip the escaped character
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            parts.append(value[start:i])
            start = i + 1
        i += 1
    parts.append(value[start:])
    return parts


def parse_sweep(overrides: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """Split ``--set`` overrides into fixed ones and the sweep's variants.

    An override ``KEY=V1,V2,...`` whose value has a comma at the top level is a swept axis
    (each ``Vi`` stripped, parsed as YAML later, like any ``--set`` value). A comma inside a
    YAML flow list or mapping (``reward.plugins=[a,b]``, ``reward.weights={outcome: 1.0,
    format: 0.1}``) or inside quotes (``data.instruction="Think, then answer"``) does not
    sweep; ``KEY=[a,b],[c]`` sweeps over two lists. So a plain string value containing a comma
    must be quoted to be kept whole.

    Several axes give their cartesian product, in command-line order with the last axis
    varying fastest: ``a=1,2 b=x,y`` -> ``{a:1,b:x}, {a:1,b:y}, {a:2,b:x}, {a:2,b:y}``.
    Without any axis there is one variant, ``{}``.

    Args:
        overrides: the ``--set`` strings as given (``KEY=VALUE``).

    Returns:
        ``(fixed, variants)``: the overrides that are not axes (order kept), and one
        ``{key: value text}`` dict per variant, keys in axis order.

    Raises:
        SweepError: a malformed override (no ``=``), an empty or repeated value in an axis,
            a key swept twice or both swept and fixed, more than ``MAX_VARIANTS`` variants,
            or two variants whose directory names (:func:`variant_name`) coincide.
    """
    fixed: list[str] = []
    axes: dict[str, list[str]] = {}
    for text in overrides:
        try:
            path, _ = parse_override(text)
        except ConfigError as exc:
            raise SweepError(str(exc)) from None
        key = ".".join(path)
        raw = text.partition("=")[2]
        parts = [p.strip() for p in split_top_level(raw)]
        if len(parts) == 1:
            fixed.append(text)
            continue
        if any(not p for p in parts):
            raise SweepError(f"--set {text!r}: empty value in a swept list (a value with a "
                             f"comma is swept: {key}=A,B,...)")
        repeated = sorted({p for p in parts if parts.count(p) > 1})
        if repeated:
            raise SweepError(f"--set {text!r}: {', '.join(map(repr, repeated))} given more "
                             "than once")
        if key in axes:
            raise SweepError(f"--set {key}: swept twice; give all its values in one --set")
        axes[key] = parts
    fixed_keys = {".".join(parse_override(t)[0]) for t in fixed}
    both = [k for k in axes if k in fixed_keys]
    if both:
        raise SweepError(f"--set {both[0]}: both swept and fixed; give it once")
    count = math.prod(len(v) for v in axes.values())
    if count > MAX_VARIANTS:
        sizes = " x ".join(str(len(v)) for v in axes.values())
        raise SweepError(f"{sizes} = {count} variants; a sweep runs at most {MAX_VARIANTS} "
                         "(they run one after another): split it into smaller sweeps")
    variants = [dict(zip(axes, combo)) for combo in itertools.product(*axes.values())]
    names: dict[str, dict] = {}
    for variant in variants:
        name = variant_name(variant)
        if name in names:
            raise SweepError(f"variants {names[name]} and {variant} would share the directory "
                             f"name {name!r}; make their values differ in letters or digits")
        names[name] = variant
    return fixed, variants


def variant_name(variant: dict[str, str]) -> str:
    """A filesystem-safe directory name for a variant: ``key=value`` per axis joined with
    ``,`` (``algo.kl_coef=0.001,grpo.learning_rate=1e-6``); characters other than letters,
    digits and ``. _ = , + -`` become ``_``; a name over ``NAME_MAX`` characters is cut and
    suffixed with a short hash so it stays unique. ``{}`` (no axis) -> ``"default"``."""
    if not variant:
        return "default"
    name = _UNSAFE.sub("_", ",".join(f"{k}={v}" for k, v in variant.items()))
    if len(name) > NAME_MAX:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:10]
        name = f"{name[:NAME_MAX - 11]}-{digest}"
    return name


def variant_overrides(fixed: list[str], variant: dict[str, str], steps: int | None) -> list[str]:
    """The ``--set`` list of one variant: the fixed overrides, then the variant's values,
    then ``grpo.steps=<steps>`` when ``steps`` is given (so ``--steps`` wins)."""
    sets = list(fixed) + [f"{k}={v}" for k, v in variant.items()]
    if steps is not None:
        sets.append(f"grpo.steps={steps}")
    return sets


def build_configs(config_path: str | Path | None, fixed: list[str],
                  variants: list[dict[str, str]], steps: int | None,
                  out_dir: str | Path | None = None) -> list:
    """Validate every variant's config (all of them, before anything runs).

    Args:
        config_path: the run config YAML (``None``: RunConfig defaults).
        fixed, variants: from :func:`parse_sweep`.
        steps: ``grpo.steps`` for every variant, or ``None`` to keep the config's.
        out_dir: when given, each config's ``output_dir`` is set to
            ``out_dir/<variant name>``.

    Returns:
        One validated :class:`rlvr.train.config.RunConfig` per variant, in order.

    Raises:
        SweepError: ``grpo.steps`` is swept while ``steps`` is given, or some variants do
            not validate; the message names each failing variant (index and name) and the
            field, e.g. ``variant 3/4 (algo.kl_coef=-1): cfg.yaml: algo.kl_coef: ...``.
    """
    if steps is not None and any("grpo.steps" in v for v in variants):
        raise SweepError("--steps: grpo.steps is swept; drop --steps or the grpo.steps axis")
    configs, errors = [], []
    for i, variant in enumerate(variants, 1):
        name = variant_name(variant)
        try:
            config = load_config(RunConfig, config_path, variant_overrides(fixed, variant, steps))
        except ConfigError as exc:
            errors.append((f"variant {i}/{len(variants)} ({name})", str(exc)))
            continue
        if out_dir is not None:
            config.output_dir = str(Path(out_dir) / name)
        configs.append(config)
    if errors:
        if len(errors) == len(variants) > 1 and len({m for _, m in errors}) == 1:
            raise SweepError(f"every variant: {errors[0][1]}")
        raise SweepError("\n".join(f"{where}: {message}" for where, message in errors))
    return configs


__all__ = ["MAX_VARIANTS", "SweepError", "build_configs", "parse_sweep", "split_top_level",
           "variant_name", "variant_overrides"]
