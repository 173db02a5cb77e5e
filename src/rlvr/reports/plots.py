"""The report's plots (:mod:`rlvr.reports.run_report`): training curves of ``metrics.jsonl``
and validation pass@1, every alert drawn as a vertical line at its step, each rendered with
matplotlib (Agg) to a base64 PNG for embedding in the page.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rlvr.reports.numbers import finite, series

# Alert colours are kept apart from matplotlib's default cycle (tab10) used for the curves.
ACTION_COLOURS = {"warn": "#d4a000", "stop": "#e0005a", "rollback": "#5b00b0"}
OTHER_ACTION_COLOUR = "#404040"


@dataclass(frozen=True)
class PlotSpec:
    """One training-curve plot: ``keys`` of metrics.jsonl on the left axis, ``right_keys`` on
    a second axis; ``percent`` formats that axis as a percentage of 1."""

    slug: str
    title: str
    ylabel: str
    keys: tuple[str, ...]
    percent: bool = False
    right_keys: tuple[str, ...] = ()
    right_label: str = ""
    right_percent: bool = False


METRIC_PLOTS = (
    PlotSpec("length", "Completion length and truncation", "tokens",
             ("length_mean", "length_max"), right_keys=("truncation_rate",),
             right_label="truncation rate", right_percent=True),
    PlotSpec("kl", "KL divergence to the reference", "KL", ("kl",)),
    PlotSpec("clip", "Clip fraction", "fraction of tokens", ("clip_frac",), percent=True),
    PlotSpec("zero_variance", "Zero-variance groups", "fraction of groups",
             ("zero_variance_fraction",), percent=True),
    PlotSpec("degeneration", "Degeneration", "fraction of completions",
             ("repetition_rate", "garbled_rate", "script_mix_rate"), percent=True),
    PlotSpec("format", "Format and parsing errors", "fraction of completions",
             ("format_error_rate", "parse_failure_rate", "multiple_answer_rate"), percent=True),
    PlotSpec("entropy", "Policy entropy", "nats per token", ("entropy",)),
    PlotSpec("grad_norm", "Gradient norm", "L2 norm", ("grad_norm",)),
    PlotSpec("seconds", "Seconds per step", "seconds",
             ("seconds_rollout", "seconds_reward", "seconds_update")),
)

#: Plots of a multi-turn run (metrics.jsonl with ``episode_turns_mean``: a run config with an
#: ``env`` section; :func:`rlvr.envs.summary.episode_metrics`).
EPISODE_PLOTS = (
    PlotSpec("episodes", "Turns and tool calls per episode", "per episode",
             ("episode_turns_mean", "episode_tool_calls_mean"), right_keys=("tool_error_rate",),
             right_label="tool error rate", right_percent=True),
    PlotSpec("finish", "How episodes ended", "fraction of episodes",
             ("finish_rate/stop", "finish_rate/length", "finish_rate/max_turns",
              "finish_rate/max_tokens", "finish_rate/tool_timeout"), percent=True),
    PlotSpec("tool_reward", "Reward with and without tool use", "mean reward",
             ("reward_mean_tool_use", "reward_mean_no_tool_use")),
)


def _png_base64(draw: Callable[[Any], None]) -> str:
    """Render ``draw(axes)`` on a fresh Agg figure; the PNG, base64-encoded (ASCII)."""
    # deferred: matplotlib costs ~1 s to import; only drawing the plots needs it
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 3.6), dpi=100)
    FigureCanvasAgg(fig)
    draw(fig.add_subplot())
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _draw_lines(ax, rows: Sequence[dict], keys: Sequence[str], style: str = "-",
                first_colour: int = 0) -> int:
    """Plot each key that has data; returns how many lines were drawn."""
    drawn = 0
    for key in keys:
        xs, ys = series(rows, key)
        if xs:
            marker = "o" if len(xs) <= 60 else None
            ax.plot(xs, ys, style, marker=marker, markersize=3,
                    label=key.replace("$", r"\$"),  # no mathtext from metric names
                    color=f"C{(first_colour + drawn) % 10}")
            drawn += 1
    return drawn


def _mark_alerts(ax, alerts: Sequence[dict]) -> None:
    """A vertical line at every alert's step, coloured by action (one legend entry each)."""
    labelled = set()
    for alert in alerts:
        step = finite(alert.get("step"))
        if step is None:
            continue
        action = str(alert.get("action", "?"))
        ax.axvline(step, color=ACTION_COLOURS.get(action, OTHER_ACTION_COLOUR), linestyle=":",
                   linewidth=1.5, label=None if action in labelled else f"alert: {action}")
        labelled.add(action)


def _finish_axes(ax, title: str, ylabel: str, percent: bool, extra_handles=()) -> None:
    """Title, labels, integer step ticks, percent axis (from 0) and one legend outside the
    axes that also lists the lines of ``extra_handles`` (twin axes)."""
    # deferred: matplotlib costs ~1 s to import; only drawing the plots needs it
    from matplotlib.ticker import MaxNLocator, PercentFormatter

    ax.set_title(title)
    ax.set_xlabel("GRPO step")
    ax.set_ylabel(ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if percent:
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    for axis in extra_handles:
        more_handles, more_labels = axis.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    ax.legend(handles, labels, fontsize=7, loc="upper left", bbox_to_anchor=(1.08, 1.0))


def metric_plot(spec: PlotSpec, rows: Sequence[dict], alerts: Sequence[dict]) -> str | None:
    """The PNG (base64) of one training-curve plot; None when none of its keys was logged."""
    if not any(series(rows, key)[0] for key in spec.keys + spec.right_keys):
        return None

    def draw(ax) -> None:
        drawn = _draw_lines(ax, rows, spec.keys)
        twins = []
        if any(series(rows, key)[0] for key in spec.right_keys):
            right = ax.twinx()
            _draw_lines(right, rows, spec.right_keys, style="--", first_colour=drawn)
            right.set_ylabel(spec.right_label)
            if spec.right_percent:
                # deferred: matplotlib costs ~1 s to import; only drawing the plots needs it
                from matplotlib.ticker import PercentFormatter

                right.yaxis.set_major_formatter(PercentFormatter(1.0))
                right.set_ylim(bottom=0)
            twins.append(right)
        _mark_alerts(ax, alerts)
        _finish_axes(ax, spec.title, spec.ylabel, spec.percent, twins)

    return _png_base64(draw)


def reward_spec(rows: Sequence[dict]) -> PlotSpec:
    """Overall mean reward plus one line per ``reward_mean/<category>`` key."""
    categories = sorted({k for row in rows for k in row if k.startswith("reward_mean/")})
    return PlotSpec("reward", "Reward per step (mean over completions)", "reward",
                    ("reward_mean", *categories))


def validation_plot(rows: Sequence[dict], alerts: Sequence[dict]) -> str | None:
    """Greedy validation pass@1 against the GRPO step; the base model (no SFT) as a marker."""
    trained = [r for r in rows if r.get("label") != "base"]
    base = [r for r in rows if r.get("label") == "base"]
    if not series(trained, "pass_at_1")[0] and not series(base, "pass_at_1")[0]:
        return None

    def draw(ax) -> None:
        xs, ys = series(trained, "pass_at_1")
        if xs:
            ax.plot(xs, ys, "-o", markersize=4, color="C0", label="pass@1 (greedy)")
        xs, ys = series(base, "pass_at_1")
        if xs:
            ax.plot(xs, ys, "s", markersize=6, color="C7", label="base model (no SFT)")
        _mark_alerts(ax, alerts)
        _finish_axes(ax, "Validation pass@1", "pass@1", True)

    return _png_base64(draw)
