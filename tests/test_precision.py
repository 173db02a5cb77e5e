"""The precision policy (``model.precision``): ``auto`` picks bf16 only where the probe says
the device computes it natively, and every compute path follows the choice: the rollout
engine's weight snapshot, the GRPO update's autocast, SFT, the KL reference, validation,
``rlvr eval`` and ``rlvr serve``. The probe is injected, so both outcomes are tested on any
machine."""

import json
from pathlib import Path

import pytest
import torch

import rlvr.models.precision as precision
from rlvr.models.precision import DeviceCapability, resolve_precision

pytest.importorskip("transformers")

SMOKE = Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml"
NATIVE = DeviceCapability("cpu", "test CPU", "AVX512", True, "AMX: native bf16 matmuls")
EMULATED = DeviceCapability("cpu", "test CPU", "AVX2", False, "no AVX512-BF16 or AMX")


def _fake_torch_cpu(monkeypatch, isa: str, avx512_bf16: bool, amx: bool) -> None:
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: isa)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)


@pytest.mark.parametrize("isa, avx512_bf16, amx, native", [
    ("AVX2", False, False, False),  # AMD Zen 2/3, most laptops
    ("AVX512", False, False, False),  # Skylake-X: AVX-512 but no bf16 dot products
    ("AVX512", True, False, True),  # Zen 4 / Cooper Lake
    ("AVX512", False, True, True),  # Sapphire Rapids (AMX)
    ("AVX2", True, True, False),  # the flags are there, but ATen is capped to AVX2
    ("DEFAULT", False, False, False),  # ARM / no SIMD dispatch
])
def test_cpu_probe_reads_flags_and_the_aten_dispatch_level(monkeypatch, isa, avx512_bf16, amx,
                                                           native):
    _fake_torch_cpu(monkeypatch, isa, avx512_bf16, amx)
    cap = precision.probe_cpu()
    assert (cap.native_bf16, cap.isa) == (native, isa)
    assert resolve_precision("auto").precision == ("bf16" if native else "fp32")


def test_onednn_isa_cap_below_bf16_means_emulated(monkeypatch):
    _fake_torch_cpu(monkeypatch, "AVX512", True, True)
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    cap = precision.probe_cpu()
    assert not cap.native_bf16 and "ONEDNN_MAX_CPU_ISA=AVX2" in cap.reason
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX512_CORE_AMX")
    assert precision.probe_cpu().native_bf16


def test_forced_precisions_and_the_warning():
    assert resolve_precision("fp32", NATIVE).dtype == torch.float32
    forced = resolve_precision("bf16", EMULATED)
    assert forced.dtype == torch.bfloat16
    assert forced.warning and f"{precision.EMULATED_BF16_SLOWDOWN}x slower" in forced.warning
    assert resolve_precision("bf16", NATIVE).warning is None
    assert resolve_precision("auto", NATIVE).precision == "bf16"
    assert resolve_precision("auto", EMULATED).precision == "fp32"
    with pytest.raises(ValueError, match="auto, bf16, fp32"):
        resolve_precision("fp16", NATIVE)


def test_the_old_bf16_key_names_the_new_one():
    from rlvr.configio import ConfigError, load_config
    from rlvr.train.config import RunConfig

    with pytest.raises(ConfigError, match=r"model.precision.*use model.precision: fp32"):
        load_config(RunConfig, SMOKE, ["model.bf16=false"])


@pytest.mark.parametrize("cap, dtype", [(NATIVE, torch.bfloat16), (EMULATED, torch.float32)])
def test_engines_follow_the_precision(monkeypatch, cap, dtype):
    from rlvr.models import load_model_and_tokenizer
    from rlvr.rollout import create_engine

    monkeypatch.setattr(precision, "probe_capability", lambda device="cpu": cap)
    model, _ = load_model_and_tokenizer("tiny-random", seed=0)
    torch_engine = create_engine("torch", model, precision="auto")
    assert torch_engine.dtype == dtype
    assert torch_engine._current_decoder().w.embed.dtype == dtype  # the weight snapshot
    hf = create_engine("hf", model, precision="auto")
    assert hf._runner().dtype == dtype  # fp32 runs the live fp32 model, bf16 a copy
    assert (hf._runner() is model) == (dtype == torch.float32)


@pytest.mark.parametrize("cap, bf16", [(NATIVE, True), (EMULATED, False)])
def test_a_run_follows_the_probe_everywhere(monkeypatch, tmp_path, cap, bf16):
    """SFT, the update, the KL reference and validation get the resolved precision; the
    choice is saved in config.yaml and results.json."""
    import rlvr.train.grpo as grpo
    import rlvr.train.sft as sft
    import rlvr.update.loop as update_loop
    from rlvr.configio import load_config
    from rlvr.train.config import RunConfig
    from rlvr.train.run import Run

    monkeypatch.setattr(precision, "probe_capability", lambda device="cpu": cap)
    seen = {"update": set(), "sft": set()}
    real_logprobs, real_step = grpo.completion_log_probs, sft._step

    def logprobs_spy(*args, **kwargs):
        seen["update"].add(kwargs["bf16"])
        return real_logprobs(*args, **kwargs)

    def sft_spy(model, batch, pad_id, use_bf16):
        seen["sft"].add(use_bf16)
        return real_step(model, batch, pad_id, use_bf16)

    monkeypatch.setattr(grpo, "completion_log_probs", logprobs_spy)  # the KL reference's
    monkeypatch.setattr(update_loop, "completion_log_probs", logprobs_spy)  # the update's
    monkeypatch.setattr(sft, "_step", sft_spy)
    config = load_config(RunConfig, SMOKE, ["grpo.steps=2", "eval.every=0",
                                            "eval.pass_at_k_samples=0", "algo.kl_coef=0.05",
                                            "logging.tensorboard=false"])
    run = Run(config, tmp_path / "run")
    results = run.train()
    dtype = torch.bfloat16 if bf16 else torch.float32
    # rollouts and validation sample through this engine
    assert run.state.models.engine.dtype == dtype
    assert seen == {"update": {bf16}, "sft": {bf16}}  # policy and KL reference forwards
    assert results["precision"]["precision"] == ("bf16" if bf16 else "fp32")
    assert results["precision"]["requested"] == "auto"
    assert results["precision"]["isa"] == cap.isa
    saved = json.loads((tmp_path / "run" / "results.json").read_text())["precision"]
    assert saved == results["precision"]
    saved_config = (tmp_path / "run" / "config.yaml").read_text()
    assert f"precision: {'bf16' if bf16 else 'fp32'}" in saved_config


@pytest.mark.parametrize("cap, dtype", [(NATIVE, torch.bfloat16), (EMULATED, torch.float32)])
def test_eval_and_serve_follow_the_precision(monkeypatch, cap, dtype):
    from rlvr.eval.engine_sampler import load_engine_sampler
    from rlvr.models import load_model_and_tokenizer
    from rlvr.serve import ModelServer

    monkeypatch.setattr(precision, "probe_capability", lambda device="cpu": cap)
    sampler = load_engine_sampler("tiny-random", instruction="x", one_shot=False,
                                  temperature=0.7, top_p=1.0, max_new_tokens=4,
                                  precision="auto")
    assert sampler.engine.dtype == dtype
    model, tokenizer = load_model_and_tokenizer("tiny-random", seed=0)
    server = ModelServer(model, tokenizer, "tiny", precision="auto")
    assert server.engine.dtype == dtype
    forced = load_engine_sampler("tiny-random", instruction="x", one_shot=False,
                                 temperature=0.7, top_p=1.0, max_new_tokens=4, precision="fp32")
    assert forced.engine.dtype == torch.float32
