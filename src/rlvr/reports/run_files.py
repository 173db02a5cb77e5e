"""Reading a run directory for the report (:mod:`rlvr.reports.run_report`): every input is
optional, and an absent or unreadable file is None (with a note), so a report works on runs
that are still going or that crashed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from rlvr.configio import yaml_text
from rlvr.io import json_value, read_jsonl_lenient


@dataclass
class RunData:
    """What a run directory holds; None for a file that is absent or unreadable."""

    run_dir: Path
    config: dict | None = None
    results: dict | None = None
    metrics: list[dict] | None = None
    validation: list[dict] | None = None
    alerts: list[dict] | None = None
    samples: list[dict] | None = None
    notes: list[str] = field(default_factory=list)


def load_run(run_dir: Path) -> RunData:
    """Read every report input of ``run_dir``; malformed JSONL lines are skipped (and noted).

    Raises:
        ValueError: ``run_dir`` is not a directory, or has neither metrics.jsonl nor
            results.json.
    """
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir}: not a run directory (it does not exist or is a file)")
    if not (run_dir / "metrics.jsonl").is_file() and not (run_dir / "results.json").is_file():
        raise ValueError(f"{run_dir}: not a run directory (it has neither metrics.jsonl nor "
                         f"results.json)")
    data = RunData(run_dir)
    data.config = _read_mapping(run_dir / "config.yaml", data.notes)
    data.results = _read_mapping(run_dir / "results.json", data.notes)
    for name in ("metrics", "validation", "alerts", "samples"):
        setattr(data, name, read_jsonl_rows(run_dir / f"{name}.jsonl", data.notes))
    return data


def _read_mapping(path: Path, notes: list[str]) -> dict | None:
    """A JSON or YAML file holding one mapping; None (with a note) when absent or unreadable."""
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        value = json_value(text) if path.suffix == ".json" else yaml_text(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:  # too deep / long: ValueError too
        notes.append(f"{path.name}: unreadable ({exc})")
        return None
    if not isinstance(value, dict):
        notes.append(f"{path.name}: not a mapping; ignored")
        return None
    return value


def read_jsonl_rows(path: Path, notes: list[str]) -> list[dict] | None:
    """The JSON objects of a JSONL file; None when absent. Bad lines (e.g. the half-written
    last line of a running job) are skipped and counted in ``notes``."""
    if not path.is_file():
        return None
    try:
        rows, bad = read_jsonl_lenient(path)
    except OSError as exc:
        notes.append(f"{path.name}: unreadable ({exc.strerror or exc})")
        return None
    if bad:
        notes.append(f"{path.name}: skipped {bad} line(s) that are not JSON objects")
    return rows
