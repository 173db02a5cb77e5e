"""`rlvr eval --endpoint` against a real OpenAI-compatible server (`rlvr serve`'s app over the
tiny model, on a loopback port started by the test)."""

import json
import threading
import time
from contextlib import contextmanager

import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")
pytest.importorskip("transformers")

from rlvr.cli import app

runner = CliRunner()


@contextmanager
def serving_tiny_model():
    from rlvr.models import load_model_and_tokenizer
    from rlvr.serve import ModelServer, bind_socket, create_app, make_uvicorn_server

    model, tokenizer = load_model_and_tokenizer("tiny-random")
    server = ModelServer(model, tokenizer, "tiny-random", max_concurrency=8)
    sock = bind_socket("127.0.0.1", 0)
    uv = make_uvicorn_server(create_app(server), log_level="warning")
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        uv.should_exit = True
        thread.join(10)
        sock.close()


def test_eval_through_an_endpoint(tmp_path):
    out = tmp_path / "out"
    with serving_tiny_model() as url:
        result = runner.invoke(app, ["eval", "--endpoint", url, "--model", "tiny-random",
                                     "--tasks", "arithmetic", "--mixture", "1dop1d", "--limit",
                                     "3", "--n", "2", "--max-new-tokens", "8", "-o", str(out)])
    assert result.exit_code == 0, result.output
    r = json.loads((out / "results.json").read_text())
    rows = [json.loads(x) for x in (out / "completions.jsonl").read_text().splitlines()]
    assert r["problems"] == 3 and r["samples"] == 6 and len(rows) == 6
    assert all(1 <= x["tokens"] <= 8 and x["seconds"] > 0 for x in rows)
    assert "logprob" not in r["best_of@k"] and "oracle" in r["best_of@k"]  # no log-probs
    assert r["settings"]["endpoint"] == url
    c = {}
    for x in rows:
        c[x["id"]] = c.get(x["id"], 0) + (x["status"] == "correct")
    assert r["pass@k"]["1"] == pytest.approx(sum(v / 2 for v in c.values()) / 3)


def test_unreachable_endpoint_fails_with_a_message(tmp_path):
    result = runner.invoke(app, ["eval", "--endpoint", "http://127.0.0.1:9/v1", "--tasks",
                                 "arithmetic", "--limit", "1", "--n", "1", "--retries", "0",
                                 "--request-timeout", "2", "-o", str(tmp_path / "o")])
    assert result.exit_code == 1, result.output
    assert "--endpoint:" in result.output
