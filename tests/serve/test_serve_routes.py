"""`rlvr serve`'s routes beside generation (/health, /version, /metrics, /tokenize,
/detokenize, /tokenizer_info) and the context check made before an oversize prompt is
tokenized."""

from __future__ import annotations

import httpx

import rlvr

HI = [{"role": "user", "content": "hi"}]


def test_health_and_version(served):
    url, _ = served
    health = httpx.get(url + "/health", timeout=10)
    assert health.status_code == 200 and health.content == b""
    assert httpx.get(url + "/version", timeout=10).json() == {"version": rlvr.__version__}


def test_tokenize_detokenize_and_tokenizer_info(served, tiny):
    url, _ = served
    _, tokenizer = tiny
    got = httpx.post(url + "/tokenize", json={"prompt": "hello", "add_special_tokens": False},
                     timeout=10).json()
    assert got["tokens"] == tokenizer("hello", add_special_tokens=False).input_ids
    assert got["count"] == 5 and got["max_model_len"] == 512
    chat = httpx.post(url + "/tokenize", json={"messages": HI}, timeout=10).json()
    text = tokenizer.apply_chat_template(HI, add_generation_prompt=True, tokenize=False)
    assert chat["tokens"] == tokenizer(text, add_special_tokens=False).input_ids
    back = httpx.post(url + "/detokenize", json={"tokens": chat["tokens"]}, timeout=10).json()
    assert back == {"prompt": text}
    bad = httpx.post(url + "/detokenize", json={"tokens": [1000]}, timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tokens"
    info = httpx.get(url + "/tokenizer_info", timeout=10).json()
    assert info["eos_token"] == tokenizer.eos_token == "<|im_end|>"
    assert info["chat_template"] == tokenizer.chat_template
    assert info["model_max_length"] == 512


def sample(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith((name + " ", name + "{")):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_metrics_count_requests_and_tokens(tiny):
    from serve_helpers import running

    from rlvr.serve import ModelServer

    model, tokenizer = tiny
    server = ModelServer(model, tokenizer, "tiny-random")
    with running(server) as url:
        for _ in range(2):
            httpx.post(url + "/v1/completions", timeout=30, json={
                "prompt": "abc", "max_tokens": 4, "ignore_eos": True})
        httpx.get(url + "/no/such/route", timeout=10)
        text = httpx.get(url + "/metrics", timeout=10).text
    assert sample(text, 'rlvr_serve_requests_total{endpoint="/v1/completions",status="200"}') \
        == 2
    assert sample(text, 'rlvr_serve_requests_total{endpoint="other",status="404"}') == 1
    assert sample(text, "rlvr_serve_prompt_tokens_total") == 2 * 3
    assert sample(text, "rlvr_serve_generation_tokens_total") == 2 * 4
    assert sample(text, "rlvr_serve_num_requests_waiting") == 0
    assert sample(text, "rlvr_serve_time_to_first_token_seconds_count") == 2
    assert sample(text, 'rlvr_serve_e2e_request_latency_seconds_count{endpoint='
                        '"/v1/completions"}') == 2


class CountingBackend:
    """A tokenizer backend that counts its ``encode`` calls."""

    def __init__(self, backend):
        self.backend, self.calls = backend, 0

    def encode(self, *args, **kwargs):
        self.calls += 1
        return self.backend.encode(*args, **kwargs)


def test_an_oversize_prompt_is_refused_before_it_is_tokenized(served):
    url, server = served
    counting = CountingBackend(server._backend)
    server._backend = counting
    try:
        # 512 positions, tokens of at most 12 characters: 6145 characters cannot fit
        reply = httpx.post(url + "/v1/completions", json={"prompt": "a" * 6145}, timeout=30)
        assert counting.calls == 0
        chat = httpx.post(url + "/v1/chat/completions", timeout=30, json={
            "messages": [{"role": "user", "content": "a" * 10_000_000}]})
        assert counting.calls == 0
    finally:
        server._backend = counting.backend
    assert reply.status_code == 400 and reply.json()["error"]["param"] == "prompt"
    assert "6145 characters cannot fit the model's context of 512 tokens" in \
        reply.json()["error"]["message"]
    assert chat.status_code == 400 and chat.json()["error"]["param"] == "messages"
