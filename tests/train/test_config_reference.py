"""Every run-config field is documented: it has a description, and docs/config.md (written by
scripts/config_reference.py) lists it as the generator would today."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("config_reference",
                                                  ROOT / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_config_field_has_a_description():
    from rlvr.train.config import RunConfig

    gen = _generator()
    fields = list(gen.walk(RunConfig))
    assert len(fields) > 100  # the walk reaches the nested sections (reward, health, ...)
    missing = [f"{path} ({model.__name__}.{name})" for path, model, name, field in fields
               if not (field.description or "").strip()]
    assert not missing, "config fields without a description: " + ", ".join(missing)


def test_nested_models_are_walked():
    from rlvr.train.config import RunConfig

    paths = {path for path, *_ in _generator().walk(RunConfig)}
    for path in ("model.name", "data.sources[].weight", "reward.weights",
                 "health.nonfinite.action", "logging.tensorboard", "algo.kl_estimator"):
        assert path in paths


def test_docs_config_md_is_up_to_date():
    gen = _generator()
    current = (ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert current == gen.render(), (
        "docs/config.md is out of date: run `python scripts/config_reference.py`")


def test_generator_check_mode(tmp_path, monkeypatch, capsys):
    gen = _generator()
    monkeypatch.setattr(gen, "OUTPUT", tmp_path / "config.md")
    assert gen.main(["--check"]) == 1 and "out of date" in capsys.readouterr().err
    assert gen.main([]) == 0
    assert gen.main(["--check"]) == 0
    assert (tmp_path / "config.md").read_text(encoding="utf-8").startswith(
        "# Run config reference")


@pytest.mark.parametrize("annotation, text", [
    (str, "str"), (int | None, "int | None"), (list[str], "list[str]"),
    (dict[str, float], "dict[str, float]")])
def test_type_names(annotation, text):
    assert _generator().type_name(annotation) == text
