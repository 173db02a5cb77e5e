"""Metric sinks: where a run's per-step metrics and alert texts go (TensorBoard, W&B, MLflow).

Every sink takes the same flat ``{name: value}`` dict per step. Names keep their ``/`` grouping
(``reward_mean/2d+2d``) and are put under ``train/`` unless they already start with a known
section (``val/``, ``eval/``, ...): see :func:`metric_name`. Only numbers are logged; strings,
None and other values are skipped (NaN and inf are kept: a NaN loss is worth seeing).

TensorBoard comes with the ``train`` extra; W&B and MLflow are optional and imported only when
a sink for them is built. :func:`build_sinks` turns a :class:`LoggingConfig` into the sinks,
warning about (and skipping) any whose package is not installed.
"""

from __future__ import annotations

import numbers
import posixpath
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import ConfigDict, Field

from rlvr.configio import ConfigModel
from rlvr.io import make_dirs, record_output

#: Leading name segments that already say which section a metric belongs to.
SECTIONS = ("train", "val", "eval", "test", "health", "system")
DEFAULT_SECTION = "train"
#: Longest MLflow parameter value: older MLflow servers reject more than 500 characters.
MLFLOW_MAX_PARAM_LENGTH = 500


class SinkUnavailable(ImportError):
    """The package a sink needs is not installed; the message says which and how to get it."""


@runtime_checkable
class MetricSink(Protocol):
    """A destination for a run's metrics and alert texts."""

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Record the numeric ``metrics`` of training step ``step`` (others are skipped)."""

    def log_text(self, step: int, tag: str, text: str) -> None:
        """Record a text (an alert, a sample completion) under ``tag`` at ``step``."""

    def close(self) -> None:
        """Flush and release the destination; safe to call more than once."""


def metric_name(key: str) -> str:
    """The logged name of metric ``key``: unchanged if its first ``/`` segment is one of
    ``SECTIONS``, else prefixed with ``train/``.
    Examples: ``loss`` -> ``train/loss``; ``reward_mean/2d+2d`` -> ``train/reward_mean/2d+2d``;
    ``val/accuracy`` -> ``val/accuracy``."""
    section = key.split("/", 1)[0]
    return key if section in SECTIONS and "/" in key else f"{DEFAULT_SECTION}/{key}"


def numeric_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The numeric entries of ``metrics`` as floats, under their :func:`metric_name`.

    Numeric: real numbers (bool, int, float, numpy scalars) and zero-dimensional arrays or
    tensors (anything with ``ndim == 0`` and ``item()``). None, strings, lists and the like are
    dropped. NaN and inf are kept.
    """
    out: dict[str, float] = {}
    for key, value in metrics.items():
        if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
            value = value.item()
        if isinstance(value, numbers.Real):
            out[metric_name(key)] = float(value)
    return out


class TensorBoardSink:
    """Scalars and texts as TensorBoard event files under ``log_dir``.

    Args:
        log_dir: directory for the event files (created if missing).
        flush_secs: how often pending events are written to disk, seconds.
        purge_step: on resume, the first step to be logged again: events of the killed run
            at or after it are dropped, so the curves have no duplicate points.

    Raises:
        SinkUnavailable: ``torch`` or the ``tensorboard`` package is not installed.
    """

    def __init__(self, log_dir: Path, flush_secs: int = 30, purge_step: int | None = None) -> None:
        try:
            # optional dependency: torch, tensorboard (extra `train`)
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise SinkUnavailable("TensorBoard logging needs torch and tensorboard: "
                                  "pip install 'rlvr[train]' (or pip install tensorboard)") from e
        self.log_dir = Path(log_dir)
        self._before = set(self.log_dir.iterdir()) if self.log_dir.is_dir() else set()
        self._created = make_dirs(self.log_dir)
        self._writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=flush_secs,
                                     purge_step=purge_step)
        self._record_new_files()

    def _record_new_files(self) -> None:
        """Tell a run directory's manifest of the event files this writer made (never of the
        files that were in the log directory before)."""
        for path in sorted(set(self.log_dir.iterdir()) - self._before):
            record_output(path, self._created)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """One scalar per numeric metric, at ``global_step=step``."""
        for name, value in numeric_metrics(metrics).items():
            self._writer.add_scalar(name, value, global_step=step)

    def log_text(self, step: int, tag: str, text: str) -> None:
        """A text summary (shown in TensorBoard's Text tab)."""
        self._writer.add_text(tag, text, global_step=step)

    def close(self) -> None:
        """Flush the event file and close the writer."""
        self._writer.flush()
        self._writer.close()
        self._record_new_files()


class WandbSink:
    """Metrics and texts to a Weights & Biases run (``wandb.init`` at construction).

    Args:
        project: W&B project.
        entity: W&B team or user; None for the default entity.
        run_name: display name of the run.
        config: the run config, stored with the run.
        mode: ``online``, ``offline`` or ``disabled``; None for W&B's default (``WANDB_MODE``).
        dir: directory for W&B's local files.

    Raises:
        SinkUnavailable: ``wandb`` is not installed.
    """

    def __init__(self, project: str, entity: str | None = None, run_name: str | None = None,
                 config: dict | None = None, mode: str | None = None,
                 dir: Path | str | None = None) -> None:
        try:
            import wandb  # optional dependency: wandb (in no extra: pip install wandb)
        except ImportError as e:
            raise SinkUnavailable("W&B logging needs wandb: pip install wandb") from e
        self._run = wandb.init(project=project, entity=entity, name=run_name, config=config,
                               mode=mode, dir=None if dir is None else str(dir))
        self._closed = False

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """``run.log(metrics, step=step)`` with the numeric metrics. W&B drops a step lower
        than one already logged, so steps must not decrease."""
        numeric = numeric_metrics(metrics)
        if numeric:
            self._run.log(numeric, step=step)

    def log_text(self, step: int, tag: str, text: str) -> None:
        """The text as a string value of ``tag`` in the run history at ``step``."""
        self._run.log({tag: text}, step=step)

    def close(self) -> None:
        """``run.finish()`` (once)."""
        if not self._closed:
            self._closed = True
            self._run.finish()


_MLFLOW_WORDS = {"+": "plus", "@": "_at_", "%": "pct", "*": "x", "=": "eq", "<": "lt",
                 ">": "gt"}
_MLFLOW_BAD = re.compile(r"[^A-Za-z0-9_\-. /]")


def mlflow_key(name: str) -> str:
    """``name`` made valid as an MLflow metric / parameter key.

    MLflow accepts only alphanumerics, underscores, dashes, periods, spaces and slashes
    (``mlflow.utils.validation._VALID_PARAM_AND_METRIC_NAMES``), and a key must equal its
    ``posixpath.normpath`` (no empty, ``.`` or ``..`` segments, no leading or trailing ``/``).
    A few symbols become words (``+`` -> ``plus``, ``@`` -> ``_at_``, ``%`` -> ``pct``,
    ``*`` -> ``x``, ``=`` -> ``eq``, ``<`` / ``>`` -> ``lt`` / ``gt``); any other character
    becomes ``_``. Examples: ``train/reward_mean/2d+2d`` -> ``train/reward_mean/2dplus2d``,
    ``val/pass@1`` -> ``val/pass_at_1``. Distinct names can collide after this (``a+b`` and
    ``aplusb``); metric names in rlvr do not.
    """
    for symbol, word in _MLFLOW_WORDS.items():
        name = name.replace(symbol, word)
    name = _MLFLOW_BAD.sub("_", name)
    segments = ["_" if s in (".", "..") else s for s in name.split("/") if s]
    key = "/".join(segments) or "_"
    assert posixpath.normpath(key) == key, key
    return key


def flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level with dotted keys: ``{"grpo": {"steps": 40}}`` ->
    ``{"grpo.steps": 40}``."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


class MLflowSink:
    """Metrics to an MLflow run; texts as run artifacts. Uses MLflow's fluent API, so the run
    is MLflow's active run until :meth:`close`.

    Args:
        tracking_uri: MLflow tracking server or store (``http://...``, ``file:...``); None for
            MLflow's default (``MLFLOW_TRACKING_URI`` or ``./mlruns``).
        experiment: experiment name (created if missing); None for the default experiment.
        run_name: display name of the run.
        params: the run config, logged as flattened parameters (``grpo.steps``) with keys
            made valid by :func:`mlflow_key` and values cut to ``MLFLOW_MAX_PARAM_LENGTH``
            characters.

    Raises:
        SinkUnavailable: ``mlflow`` is not installed.
    """

    def __init__(self, tracking_uri: str | None = None, experiment: str | None = None,
                 run_name: str | None = None, params: dict | None = None) -> None:
        try:
            import mlflow  # optional dependency: mlflow (in no extra: pip install mlflow)
        except ImportError as e:
            raise SinkUnavailable("MLflow logging needs mlflow: pip install mlflow") from e
        self._mlflow = mlflow
        if tracking_uri is not None:
            mlflow.set_tracking_uri(tracking_uri)
        if experiment is not None:
            mlflow.set_experiment(experiment)
        self._run = mlflow.start_run(run_name=run_name)
        self._closed = False
        if params:
            mlflow.log_params({mlflow_key(k): str(v)[:MLFLOW_MAX_PARAM_LENGTH]
                               for k, v in flatten(params).items()})

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """``mlflow.log_metrics`` of the numeric metrics, keys through :func:`mlflow_key`."""
        numeric = {mlflow_key(k): v for k, v in numeric_metrics(metrics).items()}
        if numeric:
            self._mlflow.log_metrics(numeric, step=step)

    def log_text(self, step: int, tag: str, text: str) -> None:
        """The text as artifact ``<tag>/step_<step, 7 digits>.txt``."""
        self._mlflow.log_text(text, f"{mlflow_key(tag)}/step_{step:07d}.txt")

    def close(self) -> None:
        """``mlflow.end_run()`` (once)."""
        if not self._closed:
            self._closed = True
            self._mlflow.end_run()


class SinkGroup:
    """Several sinks behind one :class:`MetricSink` interface (what a training run holds).

    A sink that raises while logging (a W&B network error, a full disk) is reported with a
    ``UserWarning`` and then left out of later calls: losing a dashboard is better than losing
    the training run. :meth:`close` closes every sink, each at most once.

    Args:
        sinks: the sinks, e.g. from :func:`build_sinks`; may be empty.
    """

    def __init__(self, sinks: list[MetricSink]) -> None:
        self.sinks = list(sinks)

    def _each(self, action: str, call) -> None:
        for sink in list(self.sinks):
            try:
                call(sink)
            except Exception as e:
                self.sinks.remove(sink)
                warnings.warn(f"{type(sink).__name__}.{action} failed ({e!r}); "
                              "no more metrics go to it", stacklevel=3)

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        """``log`` on every sink."""
        self._each("log", lambda s: s.log(step, metrics))

    def log_text(self, step: int, tag: str, text: str) -> None:
        """``log_text`` on every sink."""
        self._each("log_text", lambda s: s.log_text(step, tag, text))

    def close(self) -> None:
        """``close`` on every sink; the group is empty afterwards."""
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            try:
                sink.close()
            except Exception as e:
                warnings.warn(f"{type(sink).__name__}.close failed ({e!r})", stacklevel=2)


class LoggingConfig(ConfigModel):
    """Where training metrics go. Field docs are the user documentation."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    tensorboard: bool = Field(True, description="Write TensorBoard event files under "
                              "RUN_DIR/tensorboard (view with `tensorboard --logdir RUN_DIR`). "
                              "Needs the `tensorboard` package (the `train` extra); without it "
                              "a warning is shown and the run continues without TensorBoard.")
    wandb_project: str | None = Field(None, description="Log to this Weights & Biases project. "
                                      "None: no W&B. If `wandb` is not installed a warning "
                                      "is shown and the run continues without it (install "
                                      "with `pip install wandb`; it is not an rlvr "
                                      "dependency).")
    wandb_entity: str | None = Field(None, description="W&B team or user that owns the "
                                     "project; None: your default entity.")
    wandb_mode: str | None = Field(None, description="W&B mode: `online`, `offline` (sync "
                                   "later with `wandb sync`) or `disabled`; None: W&B's "
                                   "default (the WANDB_MODE environment variable, else "
                                   "online).")
    mlflow_tracking_uri: str | None = Field(None, description="Log to MLflow at this tracking "
                                            "URI (`http://host:5000`, `file:./mlruns`, ...). "
                                            "None: no MLflow. If `mlflow` is not installed a "
                                            "warning is shown and the run continues without "
                                            "it.")
    mlflow_experiment: str = Field("rlvr", description="MLflow experiment name (created if "
                                   "missing).")


def build_sinks(config: LoggingConfig, run_dir: Path, run_config: dict,
                resume_step: int | None = None) -> list[MetricSink]:
    """The sinks that ``config`` asks for, for the run in ``run_dir``.

    TensorBoard writes to ``run_dir/tensorboard``; W&B and MLflow runs are named after
    ``run_dir`` and store ``run_config``. A sink whose package is missing is skipped with a
    ``UserWarning`` rather than an error: monitoring is an add-on, and failing a training run
    at start-up over a missing dashboard package would cost more than a run without it. The
    warning says what to install.

    Args:
        config: the run's logging section.
        run_dir: the run directory.
        run_config: the whole run config as plain data (e.g. ``model_dump(mode="json")``).
        resume_step: the checkpoint step a resumed run continues from (TensorBoard drops the
            killed run's later events).

    Returns:
        The sinks built, possibly none; close each at the end of the run.
    """
    run_dir = Path(run_dir)
    builders = []
    if config.tensorboard:
        purge = None if resume_step is None else resume_step + 1
        builders.append(lambda: TensorBoardSink(run_dir / "tensorboard", purge_step=purge))
    if config.wandb_project is not None:
        builders.append(lambda: WandbSink(config.wandb_project, entity=config.wandb_entity,
                                          run_name=run_dir.name, config=run_config,
                                          mode=config.wandb_mode, dir=run_dir))
    if config.mlflow_tracking_uri is not None:
        builders.append(lambda: MLflowSink(config.mlflow_tracking_uri,
                                           experiment=config.mlflow_experiment,
                                           run_name=run_dir.name, params=run_config))
    sinks: list[MetricSink] = []
    for build in builders:
        try:
            sinks.append(build())
        except SinkUnavailable as e:
            warnings.warn(f"{e}; continuing without it", stacklevel=2)
    return sinks

