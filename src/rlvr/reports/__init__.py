"""Reports on finished (or partial) runs.

- :mod:`rlvr.reports.run_report`: ``rlvr report RUN_DIR`` -> a self-contained ``report.html``
  (training curves, alerts, baseline vs trained, sample completions).
"""

from rlvr.reports.run_report import write_run_report

__all__ = ["write_run_report"]
