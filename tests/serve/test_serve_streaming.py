"""`rlvr serve` streams each token as the engine samples it, queues requests beyond its
concurrency instead of refusing them, stops generating for a client that went away, and
answers a seed outside int64 with a 400 on a connection that stays usable.

No timing: the engine is held after its first decode step (a wrapped decode hook) until the
test has seen what it must see while generation is provably still running."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from serve_helpers import running

from rlvr.serve import ModelServer

openai = pytest.importorskip("openai")

HI = [{"role": "user", "content": "hi"}]


class HeldEngine:
    """Wraps the jobs of ``server`` so that decoding pauses after step 0 until ``release``
    is set; ``jobs`` collects them."""

    def __init__(self, server: ModelServer):
        self.server, self.jobs = server, []
        self.release = threading.Event()
        self.paused = threading.Event()
        original = server.execute

        def execute(job):
            self.jobs.append(job)
            on_step = job.run.on_step

            def held(rows, step, tokens, logprobs, logits):
                if step == 1:
                    self.paused.set()
                    assert self.release.wait(30), "the test never released the engine"
                return on_step(rows, step, tokens, logprobs, logits)

            job.run.on_step = held
            return original(job)

        server.execute = execute


def wait_for(condition, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.fixture()
def held(tiny):
    model, tokenizer = tiny
    server = ModelServer(model, tokenizer, "tiny-random")
    engine = HeldEngine(server)
    with running(server) as url:
        yield url, server, engine
        engine.release.set()


def test_first_chunks_arrive_while_the_engine_is_still_decoding(held):
    url, _, engine = held
    stream = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0).chat.completions \
        .create(model="tiny-random", messages=HI, max_tokens=50, n=2, stream=True, seed=3,
                extra_body={"ignore_eos": True})
    chunks = iter(stream)
    seen = {0: "", 1: ""}
    tokens = 0
    while tokens < 2:  # each choice's role chunk, then step 0's token of both choices
        chunk = next(chunks)
        delta = chunk.choices[0].delta
        if delta.role is None:  # a token's chunk (its piece may be empty: a special token)
            seen[chunk.choices[0].index] += delta.content
            tokens += 1
    assert engine.paused.wait(30) and not engine.release.is_set()
    assert len(engine.jobs[0].run.rows[0].ids) == 1  # decoding has not gone past step 0
    engine.release.set()
    finishes = {}
    for chunk in chunks:
        choice = chunk.choices[0]
        seen[choice.index] += choice.delta.content or ""
        if choice.finish_reason:
            finishes[choice.index] = choice.finish_reason
    assert finishes == {0: "length", 1: "length"}
    assert [seen[i] for i in (0, 1)] == [c.text for c in engine.jobs[0].run.choices()]


def test_a_streaming_client_that_leaves_stops_its_generation(held):
    url, server, engine = held
    with httpx.Client(timeout=30) as client:
        with client.stream("POST", url + "/v1/completions", json={
                "prompt": "abc", "max_tokens": 300, "stream": True, "ignore_eos": True}) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    break  # the first token, then the client goes away
    wait_for(lambda: engine.jobs and engine.jobs[0].run.cancelled)
    engine.release.set()
    wait_for(lambda: server.admission.in_flight == 0)
    assert len(engine.jobs[0].run.rows[0].ids) <= 3  # not the 300 asked for
    reply = httpx.post(url + "/v1/completions", json={"prompt": "a", "max_tokens": 2},
                       timeout=30)
    assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] <= 2


def test_a_waiting_client_that_leaves_frees_the_server(held):
    url, server, engine = held
    port = int(url.rsplit(":", 1)[1])
    body = json.dumps({"prompt": "abc", "max_tokens": 300, "ignore_eos": True}).encode()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                     b"application/json\r\nContent-Length: " + str(len(body)).encode() +
                     b"\r\n\r\n" + body)
        assert engine.paused.wait(30)
    wait_for(lambda: engine.jobs[0].run.cancelled)  # the server saw the disconnect
    engine.release.set()
    wait_for(lambda: server.admission.in_flight == 0)
    assert len(engine.jobs[0].run.rows[0].ids) <= 3
    cancelled = server.metrics.registry.get_sample_value("rlvr_serve_requests_cancelled_total")
    assert cancelled == 1


def test_twenty_concurrent_requests_with_default_settings_are_all_answered(tiny):
    model, tokenizer = tiny
    server = ModelServer(model, tokenizer, "tiny-random")  # max_concurrency 4, queue 1024
    with running(server) as url:
        def ask(i):
            return httpx.post(url + "/v1/completions", timeout=120, json={
                "prompt": f"q{i}", "max_tokens": 3, "temperature": 0})

        with ThreadPoolExecutor(20) as pool:
            replies = list(pool.map(ask, range(20)))
    assert [r.status_code for r in replies] == [200] * 20
    assert all(len(r.json()["choices"]) == 1 for r in replies)


@pytest.mark.parametrize("seed", [2**64, 2**63, -2**63 - 1])
def test_a_seed_outside_int64_is_a_400_and_the_connection_stays_usable(served, seed):
    url, _ = served
    with httpx.Client(timeout=30) as client:
        bad = client.post(url + "/v1/completions", json={"prompt": "a", "max_tokens": 2,
                                                         "seed": seed})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "seed"
        for edge in (2**63 - 1, -2**63):
            good = client.post(url + "/v1/completions", json={"prompt": "a", "max_tokens": 2,
                                                              "seed": edge})
            assert good.status_code == 200, good.text
    sdk = openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError):
        sdk.completions.create(model="tiny-random", prompt="a", max_tokens=2, seed=seed)
    assert sdk.completions.create(model="tiny-random", prompt="a", max_tokens=2,
                                  seed=1).choices[0].finish_reason in ("stop", "length")
