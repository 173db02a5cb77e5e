"""The ``rlvr`` command line: one typer app. Each command is a thin shell over a library call.

This module builds the app and registers the commands, one module per command group:
:mod:`~rlvr.cli.verify`, :mod:`~rlvr.cli.train` (``train``, ``sft``), :mod:`~rlvr.cli.sweep`,
:mod:`~rlvr.cli.serve`, :mod:`~rlvr.cli.eval`, :mod:`~rlvr.cli.lengths`,
:mod:`~rlvr.cli.report`, and ``rlvr data`` (:mod:`~rlvr.cli.data`). What they share (the
stderr console, ``fail``, exit codes, option checks) is in :mod:`~rlvr.cli.common`.

Import policy (``rlvr --help`` and the light commands stay fast; tests/cli/test_startup.py):

- At module top: the standard library, typer, rich, and every rlvr module that imports without
  torch: ``rlvr.io``, ``rlvr.records``, ``rlvr.configio``, ``rlvr.progress``,
  ``rlvr.rewards``, ``rlvr.tasks``, ``rlvr.data``, ``rlvr.reports``, ``rlvr.envs``,
  ``rlvr.eval`` (but its engine sampler) and ``rlvr.models.loader``.
- Deferred into the command that needs it, with a ``# deferred:`` comment: the modules that
  import torch / transformers or may (``rlvr.models``, ``rlvr.rollout``, ``rlvr.algo``,
  ``rlvr.update``, ``rlvr.train``, ``rlvr.eval.engine_sampler``, ``rlvr.serve``,
  ``rlvr.distributed``, ``rlvr.monitor``). These are most of rlvr's function-level imports;
  docs/development.md says where else one is allowed.

Building the app and printing its help therefore never imports torch.
"""

from __future__ import annotations

import typer

from rlvr import __version__
from rlvr.cli import data as data_commands
from rlvr.cli import eval as eval_commands
from rlvr.cli import lengths as lengths_commands
from rlvr.cli import report as report_commands
from rlvr.cli import serve as serve_commands
from rlvr.cli import sweep as sweep_commands
from rlvr.cli import train as train_commands
from rlvr.cli import verify as verify_commands
from rlvr.cli.common import EXIT_BAD_INPUT, EXIT_STOPPED, err, fail, precision_choice

app = typer.Typer(
    name="rlvr",
    help="Train reasoning into language models with RL from verifiable rewards, and measure it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


app.add_typer(data_commands.data_app, name="data")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                 is_eager=True, callback=_print_version),
) -> None:
    """rlvr: RLVR + GRPO training, verifiable rewards, and test-time evaluation."""


# In the order `rlvr --help` lists them.
app.command()(verify_commands.verify)
app.command()(train_commands.train)
app.command()(sweep_commands.sweep)
app.command()(train_commands.sft)
app.command()(serve_commands.serve)
app.command("eval")(eval_commands.eval_)
app.command()(lengths_commands.lengths)
app.command()(report_commands.report)


def main() -> None:  # pragma: no cover - console entry point
    app()


__all__ = ["EXIT_BAD_INPUT", "EXIT_STOPPED", "app", "err", "fail", "main", "precision_choice"]
