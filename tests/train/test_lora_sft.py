"""LoRA runs: with `model.lora_rank` set, SFT trains the full weights
(`sft.full_finetune`, default), so the tiny smoke model learns the answer format; GRPO then
trains fresh adapters only, on top of `sft_model/` (the KL reference), and checkpoints,
`--resume` and `rlvr serve` load the adapters onto that SFT model. `sft.full_finetune: false`
keeps adapter-only SFT (less memory), merged into `sft_model/`."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from safetensors.torch import load_file  # noqa: E402

from rlvr.cli import app  # noqa: E402
from rlvr.models import TINY_RANDOM, load_model_and_tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "smoke.yaml")
FAST = ["--set", "eval.pass_at_k_samples=0", "--set", "eval.every=0", "--set",
        "logging.tensorboard=false", "--set", "model.precision=fp32", "--set", "model.lora_rank=8",
        "--set", "checkpoint.every=1"]
EMBED, Q = "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight"
runner = CliRunner()


def _flat(text: str) -> str:
    return " ".join(text.split())


def _validation(run: Path, label: str) -> dict:
    rows = [json.loads(x) for x in (run / "validation.jsonl").read_text().splitlines()]
    return [r for r in rows if r["label"] == label][-1]


@pytest.fixture(scope="module")
def base_weights():
    model, _ = load_model_and_tokenizer(TINY_RANDOM, seed=0)
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_lora_run_sft_trains_full_weights_then_grpo_trains_adapters_on_the_sft_model(
        tmp_path, base_weights):
    from rlvr.models.inference import load_for_inference

    run = tmp_path / "lora"
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), *FAST,
                                 "--set", "grpo.steps=1"])
    assert result.exit_code == 0, result.output
    out = _flat(result.output)
    assert "sft: full fine-tuning (sft.full_finetune)" in out
    assert "LoRA rank 8: 16,384 trainable parameters (GRPO, on sft_model/)" in out
    sft = load_file(run / "sft_model" / "model.safetensors")
    # full fine-tuning: weights no adapter reaches (embeddings) moved too
    assert not torch.equal(sft[EMBED], base_weights[EMBED])
    assert not torch.equal(sft[Q], base_weights[Q])
    assert _validation(run, "before_grpo")["format_rate"] >= 0.9  # the format was learned
    assert json.loads((run / "lora_base.json").read_text())["base"] == "sft_model"
    assert not (run / "sft_checkpoint.pt").exists()  # removed once sft_model/ is saved

    ckpt = run / "checkpoints" / "step-000001"
    adapter = load_file(ckpt / "adapter_model.safetensors")
    assert adapter and all("lora_" in k for k in adapter)
    assert any(float(v.abs().max()) > 0 for k, v in adapter.items() if "lora_B" in k)
    state = torch.load(ckpt / "trainer_state.pt", weights_only=False)
    assert len(state["optimizer"]["state"]) == len(adapter)  # AdamW over the adapters only
    merged, _ = load_for_inference(str(ckpt))  # the adapter goes onto sft_model/
    live = merged.state_dict()
    assert torch.equal(live[EMBED], sft[EMBED])  # GRPO did not touch the SFT weights ...
    assert not torch.equal(live[Q], sft[Q])  # ... but its adapters changed the projections

    resumed = runner.invoke(app, ["train", "--resume", str(run), "--set", "grpo.steps=2"])
    assert resumed.exit_code == 0, resumed.output
    again = load_file(run / "checkpoints" / "step-000002" / "adapter_model.safetensors")
    assert set(again) == set(adapter)
    # the resumed policy is sft_model/ + adapters (on the random base it would lose the format)
    assert _validation(run, "trained")["step"] == 2
    assert _validation(run, "trained")["format_rate"] >= 0.9


def test_sft_full_finetune_false_trains_sft_adapters_and_merges_them(tmp_path, base_weights):
    run = tmp_path / "lora-sft"
    result = runner.invoke(app, ["train", "--config", SMOKE, "-o", str(run), *FAST,
                                 "--set", "grpo.steps=1", "--set", "sft.full_finetune=false"])
    assert result.exit_code == 0, result.output
    assert "(SFT, sft.full_finetune: false; merged into sft_model/ before GRPO)" in _flat(
        result.output)
    sft = load_file(run / "sft_model" / "model.safetensors")
    assert torch.equal(sft[EMBED], base_weights[EMBED])  # adapters only ...
    assert not torch.equal(sft[Q], base_weights[Q])  # ... merged into the linear layers
