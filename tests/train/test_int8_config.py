"""``rollout.quantization`` and ``algo.tis_cap`` in a run config: validation, the TIS default
that int8 turns on, and the GRPO rollout engine a run builds from them."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from rlvr.configio import ConfigError, load_config
from rlvr.models import load_model_and_tokenizer
from rlvr.train.config import RunConfig
from rlvr.train.setup import grpo_rollout_engine
from rlvr.update.loop import policy_update

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"


def _config(*overrides: str) -> RunConfig:
    return load_config(RunConfig, SMOKE, list(overrides))


def test_default_is_none_without_tis():
    c = _config()
    assert c.rollout.quantization == "none" and c.algo.tis_cap is None


def test_a_bad_value_names_the_field():
    with pytest.raises(ConfigError, match=r"rollout\.quantization"):
        _config("rollout.quantization=int4")
    with pytest.raises(ConfigError, match=r"algo\.tis_cap"):
        _config("algo.tis_cap=-1")


def test_int8_turns_tis_on_unless_a_cap_is_given():
    assert _config("rollout.quantization=int8").algo.tis_cap == 2.0
    assert _config("rollout.quantization=int8", "algo.tis_cap=3").algo.tis_cap == 3.0
    assert _config("rollout.quantization=int8", "algo.tis_cap=0").algo.tis_cap == 0.0  # off
    assert _config("algo.tis_cap=1.5").algo.tis_cap == 1.5  # TIS alone, e.g. a bf16 sampler


@pytest.mark.parametrize("override, message", [
    ("rollout.engine=hf", r"rollout.quantization: int8 is implemented by the torch engine"),
    ("model.precision=bf16", r"rollout.quantization: int8 .*model.precision: bf16"),
    ("rollout.ray_address=local", r"rollout.quantization: int8 .*rollout.ray_address"),
])
def test_int8_refuses_what_it_cannot_run(override, message):
    with pytest.raises(ConfigError, match=message):
        _config("rollout.quantization=int8", override)


def test_grpo_rollouts_get_their_own_int8_engine():
    model, tokenizer = load_model_and_tokenizer("tiny-random")
    run_engine = object()
    assert grpo_rollout_engine(_config(), model, tokenizer, run_engine) is run_engine
    if not any(e in torch.backends.quantized.supported_engines for e in ("x86", "fbgemm")):
        pytest.skip("int8 rollouts need fbgemm (x86-64 torch builds)")
    engine = grpo_rollout_engine(_config("rollout.quantization=int8"), model, tokenizer,
                                 run_engine)
    assert engine is not run_engine and engine.model is model
    assert (engine.name, engine.quantization, engine.dtype) == ("torch", "int8", torch.float32)


def test_the_update_refuses_tis_without_sampler_log_probs():
    config = SimpleNamespace(grpo=SimpleNamespace(), model=SimpleNamespace(bf16=False),
                             algo=SimpleNamespace(tis_cap=2.0))
    seqs = SimpleNamespace(input_ids=torch.zeros(1, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="algo.tis_cap is set but the rollout has no sampler"):
        policy_update(None, None, seqs, torch.zeros(1), None, config, None)
