"""`rlvr serve` on the command line: bad input exits 2 before any work, a real server process
answers over loopback, and saved checkpoints (full and LoRA adapters) load for serving."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
import torch
import yaml
from typer.testing import CliRunner

from rlvr.cli import app
from rlvr.models.inference import load_for_inference
from rlvr.serve import ModelServer

runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("args, message", [
    (["--model", "nonexistent-model"], "--model: 'nonexistent-model' is neither"),
    (["--model", "tiny-random", "--engine", "vllm"], "--engine: expected one of auto, torch, hf"),
    (["--model", "tiny-random", "--max-concurrency", "0"], "--max-concurrency"),
    (["--model", "tiny-random", "--max-queue", "-1"], "--max-queue"),
    (["--model", "tiny-random", "--port", "70000"], "--port"),
    (["--model", "tiny-random", "--logprobs-mode", "processed"],
     "--logprobs-mode: expected one of raw, tempered"),
])
def test_bad_input_exits_2(args, message):
    result = runner.invoke(app, ["serve", *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_port_in_use_exits_2_naming_it():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = runner.invoke(app, ["serve", "--model", "tiny-random", "--port", str(port)])
    assert result.exit_code == 2, result.output
    assert f"--host/--port: cannot listen on 127.0.0.1:{port}" in " ".join(result.output.split())


def test_rlvr_serve_process_answers_chat_requests():
    port = _free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen([sys.executable, "-m", "rlvr.cli", "serve", "--model",
                                "tiny-random", "--port", str(port)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # a hang guard: start-up imports torch
        while True:
            assert process.poll() is None, process.stdout.read()
            try:
                models = httpx.get(url + "/v1/models", timeout=2).json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "rlvr serve did not come up in 180 s"
                time.sleep(0.2)
        assert models["data"][0]["id"] == "tiny-random"
        reply = httpx.post(url + "/v1/chat/completions", timeout=30, json={
            "messages": [{"role": "user", "content": "hi"}], "n": 2, "max_tokens": 4}).json()
        assert len(reply["choices"]) == 2 and reply["usage"]["prompt_tokens"] == 21
    finally:
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=20)[0]
    # uvicorn shuts down gracefully, then re-raises the SIGINT it caught (exit 130 / -2)
    assert process.returncode in (0, 130, -signal.SIGINT), output
    assert "Application shutdown complete" in output
    assert f"on http://127.0.0.1:{port}/v1" in output
    # one line per request on stderr: method, path, status, latency, tokens
    assert "INFO:     GET /v1/models 200 " in output
    assert re.search(r"INFO:     POST /v1/chat/completions 200 \d+\.\d ms tokens 21 prompt \+ "
                     r"\d+ completion", output), output


def _logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits


def test_full_checkpoint_directory_serves(tmp_path, tiny):
    model, tokenizer = tiny
    model.save_pretrained(tmp_path / "sft_model")
    tokenizer.save_pretrained(tmp_path / "sft_model")
    loaded, loaded_tokenizer = load_for_inference(str(tmp_path / "sft_model"))
    ids = tokenizer("12+34=").input_ids
    assert torch.allclose(_logits(loaded, ids), _logits(model, ids))
    server = ModelServer(loaded, loaded_tokenizer, "sft_model")
    assert server.engine.name == "torch"
    from rlvr.serve import ChatMessage, ChatRequest

    hi = ChatRequest(messages=[ChatMessage(role="user", content="hi")])
    assert len(server.chat_prompt(hi)) == 21


def test_lora_adapter_checkpoint_serves_merged_weights(tmp_path):
    from rlvr.models import load_model_and_tokenizer
    from rlvr.models.lora import apply_lora, merged_copy

    base, tokenizer = load_model_and_tokenizer("tiny-random", seed=3)
    policy = apply_lora(base, rank=4, alpha=8)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    step = tmp_path / "checkpoints" / "step-000001"
    policy.save_pretrained(step)
    tokenizer.save_pretrained(step)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"model": {"name": "tiny-random"},
                                                          "seed": 3}))
    loaded, loaded_tokenizer = load_for_inference(str(step))
    assert not hasattr(loaded, "peft_config")  # plain weights: the torch engine takes them
    ids = tokenizer("hello").input_ids
    expected = _logits(merged_copy(policy), ids)
    assert torch.allclose(_logits(loaded, ids), expected, atol=1e-5)
    fresh, _ = load_model_and_tokenizer("tiny-random", seed=3)
    assert not torch.allclose(_logits(fresh, ids), expected, atol=1e-3)  # adapters mattered
    assert loaded_tokenizer.chat_template
    assert ModelServer(loaded, loaded_tokenizer, str(step)).engine.name == "torch"


def test_served_model_name_is_the_id_listed_and_accepted(monkeypatch):
    """`--served-model-name NAME`: /v1/models lists NAME, a request naming NAME is answered
    (and its response says NAME), one naming the loaded model is not."""
    from serve_helpers import running

    import rlvr.serve

    captured = {}

    def fake_serve_forever(server, sock, **_):
        captured["server"] = server
        sock.close()

    monkeypatch.setattr(rlvr.serve, "serve_forever", fake_serve_forever)
    result = runner.invoke(app, ["serve", "--model", "tiny-random", "--port", str(_free_port()),
                                 "--served-model-name", "my-model"])
    assert result.exit_code == 0, result.output
    assert "tiny-random as 'my-model'" in result.output
    server = captured["server"]
    with running(server) as url:
        assert [m["id"] for m in httpx.get(url + "/v1/models", timeout=10).json()["data"]] == [
            "my-model"]
        body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        reply = httpx.post(url + "/v1/chat/completions", timeout=30,
                           json={**body, "model": "my-model"})
        assert reply.status_code == 200 and reply.json()["model"] == "my-model"
        refused = httpx.post(url + "/v1/chat/completions", timeout=30,
                             json={**body, "model": "tiny-random"})
        assert refused.status_code == 404 and "'my-model'" in refused.json()["error"]["message"]
    result = runner.invoke(app, ["serve", "--model", "tiny-random", "--served-model-name", " "])
    assert result.exit_code == 2 and "--served-model-name" in result.output


def test_queue_and_unknown_field_flags_reach_the_server(monkeypatch):
    import rlvr.serve

    captured = {}

    def fake_serve_forever(server, sock, **_):
        captured["server"] = server
        sock.close()

    monkeypatch.setattr(rlvr.serve, "serve_forever", fake_serve_forever)
    result = runner.invoke(app, ["serve", "--model", "tiny-random", "--port", str(_free_port()),
                                 "--max-concurrency", "2", "--max-queue", "7",
                                 "--ignore-unknown-fields"])
    assert result.exit_code == 0, result.output
    server = captured["server"]
    assert (server.admission.limit, server.admission.queue) == (2, 7)
    assert server.ignore_unknown_fields is True
    result = runner.invoke(app, ["serve", "--model", "tiny-random", "--port", str(_free_port())])
    assert captured["server"].admission.queue == 1024
    assert captured["server"].ignore_unknown_fields is False
