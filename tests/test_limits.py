"""Every number a config or the command line takes has an upper bound (rlvr.limits): a value
past it is refused before any work starts, naming the field and the bound; config files and
``--set`` values that Python cannot read (a 5000-digit integer, nesting past the recursion
limit, Latin-1 bytes) are errors naming their place, not tracebacks."""

import random
import subprocess
import sys
import types
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.configio import ConfigError, load_config
from rlvr.rewards.config import RewardConfig
from rlvr.train.config import RunConfig

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()


def _walk(model, prefix=""):
    for name, field in model.model_fields.items():
        yield prefix + name, field
        for arg in (field.annotation, *typing.get_args(field.annotation)):
            if isinstance(arg, type) and hasattr(arg, "model_fields"):
                yield from _walk(arg, f"{prefix}{name}.")


def _is_number(annotation) -> bool:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_number(a) for a in typing.get_args(annotation))
    return annotation in (int, float)


def test_every_number_field_of_a_run_config_has_an_upper_bound():
    numbers = [(path, field) for path, field in _walk(RunConfig) if _is_number(field.annotation)]
    assert len(numbers) > 90  # the walk reaches the nested sections
    unbounded = [path for path, field in numbers
                 if not any(getattr(m, "le", None) is not None or getattr(m, "lt", None)
                            is not None for m in field.metadata)]
    assert unbounded == []


@pytest.mark.parametrize("override, field, bound", [
    (f"seed={2**70}", "seed", "4294967295"),
    ("seed=-1", "seed", "greater than or equal to 0"),
    ("reward.timeout_s=1e308", "reward.timeout_s", "86400"),
    ("grpo.max_new_tokens=1000000000", "grpo.max_new_tokens", "131072"),
    ("reward.workers=1000000", "reward.workers", "1024"),
    ("grpo.group_size=100000", "grpo.group_size", "1024"),
    ("data.train_size=1000000000000", "data.train_size", "10000000"),
    ("grpo.steps=1000000000", "grpo.steps", "1000000"),
    ("env.tool_timeout_s=1e300", "env.tool_timeout_s", "86400"),
    ("grpo.update_processes=5000", "grpo.update_processes", "1024"),
    ("reward.weights={outcome: 1e300}", "weights.outcome", "at most 1e+06"),
    ("reward.timeout_overrides_s={code: 1e9}", "code: expected seconds <= 86400", "86400"),
    ("data.tier_weights={medium: 1e9}", "medium: expected a weight <= 1e+06", "1e+06"),
])
def test_a_value_past_its_bound_names_the_field_and_the_bound(override, field, bound):
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, None, [override])
    message = str(info.value)
    assert field in message and bound in message, message
    assert message.startswith(f"--set {override!r}: ")


def test_the_bounds_themselves_are_accepted():
    config = load_config(RunConfig, None, ["seed=4294967295", "reward.workers=1024",
                                           "grpo.max_new_tokens=131072",
                                           "reward.timeout_s=86400"])
    assert (config.seed, config.reward.workers, config.grpo.max_new_tokens,
            config.reward.timeout_s) == (4294967295, 1024, 131072, 86400.0)


def test_the_largest_seed_is_one_that_random_torch_and_numpy_accept():
    """2**32 - 1 seeds all three (the trainer adds small offsets for torch generators);
    numpy's legacy seeding refuses one more."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    from rlvr.limits import MAX_SEED

    assert MAX_SEED == 4294967295
    random.Random(MAX_SEED)
    np.random.RandomState(MAX_SEED)
    torch.Generator().manual_seed(MAX_SEED + 17)
    with pytest.raises(ValueError):
        np.random.RandomState(MAX_SEED + 1)


def test_docs_config_md_shows_the_ranges():
    text = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert "| `reward.workers` | int | `1` | `[0, 1024]` |" in text
    assert "| `reward.timeout_s` | float | `2.0` | `(0, 86400]` |" in text
    assert "| `seed` | int | `0` | `[0, 4294967295]` |" in text


def test_a_5000_digit_integer_in_a_config_file_names_its_line(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("name: x\nseed: " + "9" * 5000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid YAML: an integer of 5000 characters")
    assert "line 2, column 7" in message and len(message) < 600


def test_a_5000_digit_set_value_is_named_by_its_start(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, None, ["seed=" + "9" * 5000])
    message = str(info.value)
    assert message.startswith("--set 'seed=99999") and "(5005 characters)" in message
    assert "at most 4300" in message and len(message) < 400


@pytest.mark.parametrize("where", ["file", "set"])
def test_yaml_nested_past_the_recursion_limit_is_a_config_error(tmp_path, where):
    deep = "[" * 1500 + "]" * 1500  # past the recursion limit (1000)
    if where == "file":
        path = tmp_path / "run.yaml"
        path.write_text(f"name: {deep}\n", encoding="utf-8")
        args = (path, [])
    else:
        args = (None, [f"name={deep}"])
    with pytest.raises(ConfigError) as info:
        load_config(RunConfig, *args)
    message = str(info.value)
    assert "nested too deeply (more than 100 levels)" in message
    # in the file the mapping is the first level (the 100th bracket is the 101st level, after
    # 'name: '); a --set value is the list itself (the 101st bracket)
    assert ("line 1, column 106" if where == "file" else "at column 101 of the value") in message


def test_yaml_nested_100_levels_still_loads():
    from rlvr.configio import yaml_text

    value = yaml_text("[" * 100 + "7" + "]" * 100)
    for _ in range(99):
        value = value[0]
    assert value == [7]


def test_a_latin1_config_names_the_line_and_the_byte(tmp_path):
    path = tmp_path / "reward.yaml"
    path.write_bytes("timeout_s: 2.0\n# caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_config(RewardConfig, path)
    assert str(info.value).startswith(f"{path}:2: not valid UTF-8 (byte 0xe9 at column 6)")


def test_a_utf8_config_with_a_byte_order_mark_still_loads(tmp_path):
    path = tmp_path / "reward.yaml"
    path.write_bytes("\ufefftimeout_s: 3.5\n# café\n".encode("utf-8"))
    assert load_config(RewardConfig, path).timeout_s == 3.5


def test_verify_refuses_a_million_workers_before_reading_anything(tmp_path):
    """The option check names --workers and its bound; no worker is started (the input's
    first line is invalid, so a run that went on would fail there instead)."""
    inp = tmp_path / "in.jsonl"
    inp.write_text("not json\n", encoding="utf-8")
    result = runner.invoke(app, ["verify", str(inp), "--workers", "1000000"])
    assert result.exit_code == 2
    assert "--workers" in result.output and "1024" in result.output
    assert "in.jsonl:1" not in result.output


def test_verify_refuses_a_timeout_past_a_day(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text("not json\n", encoding="utf-8")
    result = runner.invoke(app, ["verify", str(inp), "--timeout", "1e308"])
    assert result.exit_code == 2
    assert "--timeout" in result.output and "86400" in result.output


def test_a_latin1_config_exits_2_from_the_command_line(tmp_path):
    path = tmp_path / "reward.yaml"
    path.write_bytes("# caf\xe9\ntimeout_s: 2.0\n".encode("latin-1"))
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"task_type": "math", "completion": "#### 4", "reference": "4"}\n')
    proc = subprocess.run([sys.executable, "-m", "rlvr.cli", "verify", str(inp), "--config",
                           str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"{path}:1: not valid UTF-8" in proc.stderr and "Traceback" not in proc.stderr
