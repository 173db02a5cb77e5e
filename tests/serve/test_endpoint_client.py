"""`rlvr.eval.endpoint.sample_endpoint` against the real `rlvr serve` (tiny model) and against a
scripted stdlib HTTP server: retries with backoff, timeouts, servers that ignore n, the
concurrency limit, argument checks."""

from __future__ import annotations

import socket
import time
from types import SimpleNamespace

import httpx
import pytest
from serve_helpers import ScriptedServer, chat_body

from rlvr.eval.endpoint import EndpointError, EndpointSample, chat_url, sample_endpoint

HI = [{"role": "user", "content": "hi"}]
YO = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "yo"}]
FAST = dict(temperature=1.0, top_p=1.0, max_tokens=6, seed=1, timeout_s=10, retries=0,
            concurrency=2)


def test_samples_n_per_prompt_from_the_real_server(served):
    url, _ = served
    result = sample_endpoint(url, [HI, YO], n=3, **FAST)
    assert [len(samples) for samples in result] == [3, 3]
    for samples in result:
        for sample in samples:
            assert isinstance(sample, EndpointSample)
            assert 0 <= sample.tokens <= 6 and len(sample.text) <= 6
            assert sample.seconds > 0
    # The same request sent by hand: same seed, same texts, same token total.
    raw = httpx.post(url + "/v1/chat/completions", timeout=30, json={
        "messages": YO, "n": 3, "temperature": 1.0, "top_p": 1.0, "max_tokens": 6,
        "seed": 1}).json()
    assert [s.text for s in result[1]] == [c["message"]["content"] for c in raw["choices"]]
    assert sum(s.tokens for s in result[1]) == raw["usage"]["completion_tokens"]


def test_same_seed_gives_the_same_samples(served):
    url, _ = served
    first = sample_endpoint(url + "/v1", [HI], n=2, model="tiny-random", **FAST)
    again = sample_endpoint(url + "/v1/chat/completions", [HI], n=2, **FAST)
    assert [s.text for s in first[0]] == [s.text for s in again[0]]


def test_chat_url_accepts_root_v1_and_full_path():
    assert chat_url("http://h:1") == "http://h:1/v1/chat/completions"
    assert chat_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert chat_url("https://h/v1/chat/completions") == "https://h/v1/chat/completions"
    with pytest.raises(ValueError, match="url"):
        chat_url("h:1")


def test_retries_a_503_then_succeeds():
    script = [(503, {"error": {"message": "warming up"}}, 0.0),
              (200, chat_body(["abc", "abcd"], completion_tokens=7), 0.0)]
    with ScriptedServer(script) as fake:
        result = sample_endpoint(fake.url, [HI], n=2, backoff_s=0.01, **{**FAST, "retries": 2})
    assert len(fake.requests) == 2
    assert [s.text for s in result[0]] == ["abc", "abcd"]
    assert [s.tokens for s in result[0]] == [3, 4]  # 7 tokens shared by text length
    assert fake.requests[0]["n"] == 2 and fake.requests[0]["seed"] == 1
    assert fake.requests[0]["messages"] == HI and "model" not in fake.requests[0]


def test_retries_a_429_after_its_retry_after():
    script = [(429, {"error": {"message": "busy"}}, 0.0), (200, chat_body(["ok"], 2), 0.0)]
    with ScriptedServer(script) as fake:
        result = sample_endpoint(fake.url, [HI], n=1, backoff_s=0.01, **{**FAST, "retries": 1})
    assert [s.text for s in result[0]] == ["ok"] and len(fake.requests) == 2


def test_gives_up_after_retries_with_the_last_error():
    with ScriptedServer([(503, {"error": {"message": "overloaded"}}, 0.0)]) as fake:
        with pytest.raises(EndpointError, match=r"3 attempt\(s\).*HTTP 503: overloaded"):
            sample_endpoint(fake.url, [HI], n=1, backoff_s=0.01, **{**FAST, "retries": 2})
    assert len(fake.requests) == 3


def test_backoff_doubles_between_attempts(monkeypatch):
    from rlvr.eval import endpoint

    waits = []
    # the client's own sleeps, recorded instead of slept (the module's `time`, not the global)
    monkeypatch.setattr(endpoint, "time", SimpleNamespace(perf_counter=time.perf_counter,
                                                          sleep=waits.append))
    with ScriptedServer([(500, {}, 0.0)]) as fake:
        with pytest.raises(EndpointError):
            sample_endpoint(fake.url, [HI], n=1, backoff_s=0.1, **{**FAST, "retries": 2})
    assert waits == pytest.approx([0.1, 0.2])  # before attempt 2, then before attempt 3
    assert len(fake.requests) == 3


def test_a_4xx_is_not_retried():
    with ScriptedServer([(400, {"error": {"message": "temperature: too hot"}}, 0.0)]) as fake:
        with pytest.raises(EndpointError, match="HTTP 400: temperature: too hot"):
            sample_endpoint(fake.url, [HI], n=1, backoff_s=0.01, **{**FAST, "retries": 3})
    assert len(fake.requests) == 1


def test_timeout_is_retried_then_reported():
    script = [(200, chat_body(["late"], 1), 30.0)]
    with ScriptedServer(script) as fake:
        start = time.perf_counter()
        with pytest.raises(EndpointError, match="timed out"):
            sample_endpoint(fake.url, [HI], n=1, backoff_s=0.01,
                            **{**FAST, "timeout_s": 0.2, "retries": 1})
        # two 0.2 s timeouts, not the two 30 s replies: a margin no loaded machine needs
        assert time.perf_counter() - start < 15.0
    assert len(fake.requests) == 2


def test_timeout_then_success():
    script = [(200, chat_body(["late"], 1), 1.0), (200, chat_body(["ok"], 1), 0.0)]
    with ScriptedServer(script) as fake:
        result = sample_endpoint(fake.url, [HI], n=1, backoff_s=0.01,
                                 **{**FAST, "timeout_s": 0.2, "retries": 1})
    assert [s.text for s in result[0]] == ["ok"]


def test_connection_refused_is_retried_then_reported():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again before the client connects
    with pytest.raises(EndpointError, match="2 attempt.*connection error"):
        sample_endpoint(f"http://127.0.0.1:{port}", [HI], n=1, backoff_s=0.01,
                        **{**FAST, "retries": 1})


def test_server_ignoring_n_is_asked_again_with_new_seeds():
    with ScriptedServer([(200, chat_body(["x"], 5), 0.0)]) as fake:
        result = sample_endpoint(fake.url, [HI], n=3, **{**FAST, "seed": 10})
    assert [s.tokens for s in result[0]] == [5, 5, 5]  # one choice per response: exact
    assert [r["seed"] for r in fake.requests] == [10, 11, 12]
    assert [r["n"] for r in fake.requests] == [3, 2, 1]


def test_shared_token_counts_never_exceed_max_tokens():
    with ScriptedServer([(200, chat_body(["abcdefgh", "a"], 10), 0.0)]) as fake:
        result = sample_endpoint(fake.url, [HI], n=2, **FAST)  # max_tokens 6
    assert [s.tokens for s in result[0]] == [6, 4]


def test_no_usage_gives_tokens_none():
    with ScriptedServer([(200, chat_body(["a", "b"], None), 0.0)]) as fake:
        result = sample_endpoint(fake.url, [HI], n=2, **FAST)
    assert [s.tokens for s in result[0]] == [None, None]


@pytest.mark.parametrize("concurrency, expected", [(1, 1), (3, 3)])
def test_concurrency_limits_requests_in_flight(concurrency, expected):
    with ScriptedServer([(200, chat_body(["x"], 1), 0.1)]) as fake:
        result = sample_endpoint(fake.url, [HI] * 6, n=1,
                                 **{**FAST, "concurrency": concurrency})
    assert len(result) == 6 and len(fake.requests) == 6
    assert fake.max_in_flight == expected


@pytest.mark.parametrize("override, name", [
    ({"n": 0}, "n"), ({"temperature": -0.1}, "temperature"), ({"top_p": 0}, "top_p"),
    ({"max_tokens": 0}, "max_tokens"), ({"timeout_s": 0}, "timeout_s"),
    ({"retries": -1}, "retries"), ({"concurrency": 0}, "concurrency"),
    ({"seed": 1.5}, "seed"),
])
def test_bad_arguments_name_the_argument(override, name):
    with pytest.raises(ValueError, match=f"^{name}: expected"):
        sample_endpoint("http://127.0.0.1:9", [HI], **{"n": 1, **FAST, **override})


def test_bad_prompts_name_the_prompt():
    with pytest.raises(ValueError, match=r"prompts\[1\]"):
        sample_endpoint("http://127.0.0.1:9", [HI, []], n=1, **FAST)
    with pytest.raises(ValueError, match=r"prompts\[0\]\[0\]"):
        sample_endpoint("http://127.0.0.1:9", [[{"content": "x"}]], n=1, **FAST)
