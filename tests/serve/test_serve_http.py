"""`rlvr serve` over real HTTP on loopback (tiny random model): response shapes, usage
counts, n, seeds, max_tokens, stop strings, OpenAI-style errors with the right status codes."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from serve_helpers import running

from rlvr.serve import Admission, APIError, ModelServer

HI = [{"role": "user", "content": "hi"}]
# "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n" under the character tokenizer:
# 1 + 4 + 1 + 2 + 1 + 1 + 1 + 9 + 1 tokens.
HI_PROMPT_TOKENS = 21


def post(url: str, path: str, body) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=30)


def test_models_lists_the_served_model(served):
    url, _ = served
    response = httpx.get(url + "/v1/models", timeout=10)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["tiny-random"]
    assert body["data"][0]["object"] == "model"


def test_chat_returns_n_choices_with_usage_and_respects_max_tokens(served):
    url, _ = served
    response = post(url, "/v1/chat/completions",
                    {"model": "tiny-random", "messages": HI, "n": 4, "max_tokens": 8, "seed": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "chat.completion" and body["model"] == "tiny-random"
    assert [c["index"] for c in body["choices"]] == [0, 1, 2, 3]
    for choice in body["choices"]:
        assert choice["message"]["role"] == "assistant"
        # one character per token, special tokens dropped: never longer than max_tokens
        assert len(choice["message"]["content"]) <= 8
        assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["prompt_tokens"] == HI_PROMPT_TOKENS
    lengths = sum(c["finish_reason"] == "length" for c in body["choices"])
    assert 8 * lengths <= usage["completion_tokens"] <= 4 * 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_completions_orders_choices_prompt_major(served):
    url, _ = served
    response = post(url, "/v1/completions", {"prompt": ["abc", "de"], "n": 2, "max_tokens": 5,
                                             "temperature": 0})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["object"] == "text_completion"
    texts = [c["text"] for c in body["choices"]]
    assert len(texts) == 4
    assert texts[0] == texts[1] and texts[2] == texts[3]  # greedy: a prompt's n rows agree
    assert body["usage"]["prompt_tokens"] == 3 + 2  # each prompt counted once, not n times
    assert body["usage"]["completion_tokens"] <= 4 * 5


def test_same_seed_same_text_other_seed_other_text(served):
    url, _ = served

    def texts(seed):
        body = post(url, "/v1/chat/completions", {"messages": HI, "n": 3, "max_tokens": 12,
                                                  "temperature": 1.0, "seed": seed}).json()
        return [c["message"]["content"] for c in body["choices"]]

    first = texts(7)
    assert texts(7) == first
    assert texts(8) != first
    assert len(set(first)) > 1  # the n samples of one request differ


def test_default_max_tokens_shrinks_to_the_context_left(served):
    url, _ = served
    body = post(url, "/v1/completions", {"prompt": "a" * 500, "temperature": 0}).json()
    assert body["usage"]["prompt_tokens"] == 500
    assert body["usage"]["completion_tokens"] <= 512 - 500  # not the default 256


@pytest.mark.parametrize("stop_slice", [slice(2, 4), slice(3, 4)], ids=["two-chars", "one-token"])
def test_stop_string_cuts_the_text_before_it(served, stop_slice):
    url, _ = served
    request = {"prompt": "Hello", "max_tokens": 20, "temperature": 1.0, "seed": 5}
    full = post(url, "/v1/completions", request).json()
    text = full["choices"][0]["text"]
    assert len(text) >= 4, f"seed 5 should give a long enough sample, got {text!r}"
    stop = text[stop_slice]
    cut = post(url, "/v1/completions", {**request, "stop": [stop, "never-seen"]}).json()
    choice = cut["choices"][0]
    assert choice["text"] == text[:text.find(stop)]
    assert choice["finish_reason"] == "stop"
    used = cut["usage"]["completion_tokens"]
    assert text.find(stop) + len(stop) <= used <= full["usage"]["completion_tokens"]


@pytest.mark.parametrize("path, body, param", [
    ("/v1/chat/completions", {"messages": HI, "temperature": -1}, "temperature"),
    ("/v1/chat/completions", {"messages": HI, "top_p": 1.5}, "top_p"),
    ("/v1/chat/completions", {"messages": HI, "n": 0}, "n"),
    ("/v1/chat/completions", {"messages": HI, "max_tokens": 0}, "max_tokens"),
    ("/v1/chat/completions", {"messages": HI, "max_tokens": 100000}, "max_tokens"),
    ("/v1/chat/completions", {"messages": HI, "seed": "x"}, "seed"),
    ("/v1/chat/completions", {"messages": HI, "stream": "yes"}, "stream"),
    ("/v1/chat/completions", {"messages": HI, "top_logprobs": 21, "logprobs": True},
     "top_logprobs"),
    ("/v1/chat/completions", {"messages": HI, "top_logprobs": 2}, "top_logprobs"),
    ("/v1/chat/completions", {"messages": HI, "logprobs": 3}, "logprobs"),
    ("/v1/chat/completions", {"messages": HI, "stream_options": {"include_usage": True}},
     "stream_options"),
    ("/v1/chat/completions", {"messages": HI, "logit_bias": {"x": 100}}, "logit_bias"),
    ("/v1/chat/completions", {"messages": HI, "logit_bias": {"5": 101}}, "logit_bias"),
    ("/v1/chat/completions", {"messages": HI, "presence_penalty": 2.5}, "presence_penalty"),
    ("/v1/chat/completions", {"messages": HI, "tools": [{"type": "function"}]}, "tools"),
    ("/v1/chat/completions", {"messages": HI, "response_format": {"type": "json_object"}},
     "response_format"),
    ("/v1/chat/completions", {"messages": HI, "return_token_ids": 1}, "return_token_ids"),
    ("/v1/completions", {"prompt": "x", "logprobs": 21}, "logprobs"),
    ("/v1/completions", {"prompt": "x", "logprobs": True}, "logprobs"),
    ("/v1/chat/completions", {"messages": HI, "echo": True}, "echo"),
    ("/v1/completions", {"prompt": "x", "echo": True, "stream": True}, "echo"),
    ("/v1/completions", {"prompt": "x", "best_of": 3}, "best_of"),
    ("/v1/chat/completions", {"messages": HI, "stop": ["a", ""]}, "stop"),
    ("/v1/chat/completions", {"messages": []}, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "bot", "content": "x"}]}, "messages.0.role"),
    ("/v1/chat/completions", {"n": 1}, "messages"),
    ("/v1/completions", {"prompt": [1, "a"]}, "prompt.0"),
    ("/v1/completions", {"prompt": [[1, 2], [3, 100]]}, "prompt.1"),
    ("/v1/completions", {"prompt": [5, -1]}, "prompt"),
    ("/v1/completions", {"prompt": ""}, "prompt"),
    ("/v1/completions", {"prompt": "x", "temperature": "0.5"}, "temperature"),
])
def test_bad_field_is_400_naming_it(served, path, body, param):
    url, _ = served
    response = post(url, path, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param
    assert error["message"].startswith(f"{param}: ")
    assert error["type"] == "invalid_request_error"


def test_invalid_json_is_400_naming_the_body(served):
    url, _ = served
    response = httpx.post(url + "/v1/chat/completions", content=b"{not json",
                          headers={"Content-Type": "application/json"}, timeout=10)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "body"
    assert "invalid JSON" in response.json()["error"]["message"]


def test_unknown_model_and_route_are_404(served):
    url, _ = served
    response = post(url, "/v1/chat/completions", {"model": "gpt-9", "messages": HI})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "model_not_found"
    assert "tiny-random" in response.json()["error"]["message"]
    response = httpx.get(url + "/v1/nothing", timeout=10)
    assert response.status_code == 404 and "error" in response.json()


def test_full_queue_answers_429_with_retry_after(tiny):
    model, tokenizer = tiny
    server = ModelServer(model, tokenizer, "tiny-random", max_concurrency=1, max_queue=0)
    with running(server) as url:
        server.admission.in_flight = 1  # the one slot taken, no room to wait
        response = post(url, "/v1/chat/completions", {"messages": HI, "max_tokens": 2})
        server.admission.in_flight = 0
        assert response.status_code == 429
        assert response.headers["retry-after"] == "1"
        assert response.json()["error"]["type"] == "rate_limit_error"
        assert "max_queue 0" in response.json()["error"]["message"]
        again = post(url, "/v1/chat/completions", {"messages": HI, "max_tokens": 2})
        assert again.status_code == 200


def test_admission_queues_in_order_and_refuses_only_when_the_queue_is_full():
    async def scenario():
        admission = Admission(1, queue=2)
        await admission.enter()  # admitted at once
        order = []

        async def waiter(name):
            await admission.enter()
            order.append(name)

        first = asyncio.ensure_future(waiter("first"))
        second = asyncio.ensure_future(waiter("second"))
        await asyncio.sleep(0)
        assert (admission.in_flight, admission.waiting) == (1, 2)
        with pytest.raises(APIError) as caught:
            await admission.enter()  # a third waiter: the queue is full
        assert caught.value.status == 429
        first.cancel()  # its client went away: it leaves the queue
        await asyncio.sleep(0)
        assert admission.waiting == 1
        admission.leave()  # the slot passes to the next in line
        await second
        assert order == ["second"] and admission.in_flight == 1
        admission.leave()
        assert admission.in_flight == 0

    asyncio.run(scenario())
    with pytest.raises(ValueError, match="max_concurrency"):
        Admission(0)
    with pytest.raises(ValueError, match="max_queue"):
        Admission(1, queue=-1)


def test_architecture_the_torch_engine_refuses_is_served_by_hf(tiny, tiny_gpt2):
    _, tokenizer = tiny
    server = ModelServer(tiny_gpt2, tokenizer, "gpt2-tiny")
    assert server.engine.name == "hf"
    with running(server) as url:
        request = {"messages": HI, "n": 2, "max_tokens": 4, "seed": 1}
        first = post(url, "/v1/chat/completions", request).json()
        again = post(url, "/v1/chat/completions", request).json()
        too_long = post(url, "/v1/chat/completions", {**request, "max_tokens": 60})
    assert len(first["choices"]) == 2 and first["usage"]["completion_tokens"] <= 8
    assert first["choices"] == again["choices"]  # seeded
    assert too_long.status_code == 400  # 21 prompt tokens + 60 > 64 positions
    assert too_long.json()["error"]["param"] == "max_tokens"


def test_every_request_is_logged_with_method_path_status_latency_and_tokens(served, caplog):
    import logging
    import re

    url, _ = served
    with caplog.at_level(logging.INFO, logger="rlvr.serve"):
        assert post(url, "/v1/chat/completions",
                    {"messages": HI, "n": 2, "max_tokens": 3, "seed": 1}).status_code == 200
        assert post(url, "/v1/completions", {"prompt": "1+1=", "max_tokens": 2}).status_code \
            == 200
        assert post(url, "/v1/chat/completions", {"messages": HI, "n": 0}).status_code == 400
        assert httpx.get(url + "/v1/models", timeout=10).status_code == 200
        assert httpx.get(url + "/v1/nothing", timeout=10).status_code == 404
    lines = [r.getMessage() for r in caplog.records if r.name == "rlvr.serve"]
    number = r"\d+\.\d ms"
    patterns = [rf"POST /v1/chat/completions 200 {number} tokens {HI_PROMPT_TOKENS} prompt \+ "
                r"[1-6] completion", rf"POST /v1/completions 200 {number} tokens 4 prompt \+ "
                r"[12] completion", rf"POST /v1/chat/completions 400 {number}",
                rf"GET /v1/models 200 {number}", rf"GET /v1/nothing 404 {number}"]
    assert len(lines) == len(patterns), lines
    for line, pattern in zip(lines, patterns):
        assert re.fullmatch(pattern, line), line
