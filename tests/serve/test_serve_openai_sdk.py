"""`rlvr serve` read by the OpenAI Python SDK: streamed and whole chat completions and
completions whose tokens, log-probs and top log-probs equal the rollout engine's own output for
the same seed (the engine run directly, compared exactly), vLLM's token-id fields, the raw
server-sent events, and 400s the SDK raises."""

from __future__ import annotations

import logging
import re

import httpx
import pytest
import torch
from serve_helpers import running

from rlvr.rollout import SamplingParams, create_engine
from rlvr.serve import ModelServer
from rlvr.serve.logprobs import FLOOR_LOGPROB, json_logprob
from rlvr.serve.stream import token_pieces
from rlvr.tasks.prompting import stop_token_ids

openai = pytest.importorskip("openai")

HI = [{"role": "user", "content": "hi"}]
SAMPLING = dict(temperature=0.8, top_p=0.95, seed=11)


@pytest.fixture(scope="module")
def fp32_servers(tiny):
    """``{mode: (base_url, ModelServer)}``: live fp32 torch-engine servers reporting raw and
    tempered log-probs."""
    model, tokenizer = tiny
    servers = {mode: ModelServer(model, tokenizer, "tiny-random", engine="torch",
                                 precision="fp32", logprobs_mode=mode)
               for mode in ("raw", "tempered")}
    with running(servers["raw"]) as raw_url, running(servers["tempered"]) as tempered_url:
        yield {"raw": (raw_url, servers["raw"]), "tempered": (tempered_url,
                                                              servers["tempered"])}


def client(url: str):
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=60)


def engine_output(tiny, prompts: list[list[int]], *, n: int, max_tokens: int, top: int,
                  raw: bool):
    """The torch engine's own output, run directly (not through the server)."""
    model, tokenizer = tiny
    engine = create_engine("torch", model, pad_token_id=tokenizer.pad_token_id, precision="fp32")
    params = SamplingParams(**SAMPLING, n=n, max_new_tokens=max_tokens, top_logprobs=top,
                            raw_logprobs=raw, stop_token_ids=stop_token_ids(tokenizer))
    return engine.generate(prompts, params)


def chat_prompt_ids(tokenizer) -> list[int]:
    text = tokenizer.apply_chat_template(HI, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False).input_ids


def reported(out, row: int, raw: bool) -> list[float]:
    values = out.raw_logprobs if raw else out.logprobs
    return values[row, :int(out.lengths[row])].tolist()


def top_of(out, row: int) -> list[list[tuple[int, float]]]:
    length = int(out.lengths[row])
    return [list(zip(ids, values)) for ids, values in zip(
        out.top_token_ids[row, :length].tolist(), out.top_logprobs[row, :length].tolist())]


def test_sdk_streams_chat_with_the_engines_tokens_and_logprobs(fp32_servers, tiny):
    url, _ = fp32_servers["raw"]
    _, tokenizer = tiny
    stream = client(url).chat.completions.create(
        model="tiny-random", messages=HI, n=2, max_tokens=10, logprobs=True, top_logprobs=3,
        stream=True, stream_options={"include_usage": True},
        extra_body={"return_token_ids": True}, **SAMPLING)
    chunks = list(stream)
    prompt = chat_prompt_ids(tokenizer)
    assert chunks[0].model_extra["prompt_token_ids"] == prompt
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    *body, last = chunks
    assert last.choices == [] and all(c.usage is None for c in body)

    got: dict[int, dict] = {}
    for chunk in body:
        (choice,) = chunk.choices
        seen = got.setdefault(choice.index, {"roles": [], "text": "", "ids": [], "entries": [],
                                             "finish": []})
        if choice.delta.role is not None:
            assert not seen["ids"]  # the role delta comes first
            seen["roles"].append(choice.delta.role)
        seen["text"] += choice.delta.content or ""
        seen["ids"] += choice.model_extra.get("token_ids") or []
        if choice.logprobs is not None:
            seen["entries"] += choice.logprobs.content
        if choice.finish_reason is not None:
            seen["finish"].append(choice.finish_reason)

    out = engine_output(tiny, [prompt], n=2, max_tokens=10, top=3, raw=True)
    assert sorted(got) == [0, 1]
    for row in range(2):
        seen, ids = got[row], out.completion(row)
        assert seen["roles"] == ["assistant"]
        assert seen["ids"] == ids
        assert seen["text"] == tokenizer.decode(ids, skip_special_tokens=True)
        assert seen["finish"] == [out.finish_reason[row]]
        assert [e.token for e in seen["entries"]] == [tokenizer.decode([t]) for t in ids]
        assert [e.logprob for e in seen["entries"]] == reported(out, row, raw=True)
        assert [e.bytes for e in seen["entries"]] == [list(e.token.encode()) for e in
                                                      seen["entries"]]
        expected_top = top_of(out, row)
        for entry, top in zip(seen["entries"], expected_top):
            assert [(t.token, t.logprob) for t in entry.top_logprobs] == [
                (tokenizer.decode([i]), v) for i, v in top]
    assert out.completion(0) != out.completion(1)  # the two samples differ
    total = int(out.lengths.sum())
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (len(prompt), total)


@pytest.mark.parametrize("mode", ["raw", "tempered"])
def test_sdk_whole_chat_carries_the_engines_logprobs_and_token_ids(fp32_servers, tiny, mode):
    url, _ = fp32_servers[mode]
    _, tokenizer = tiny
    reply = client(url).chat.completions.create(
        model="tiny-random", messages=HI, n=3, max_tokens=8, logprobs=True, top_logprobs=2,
        extra_body={"return_token_ids": True, "return_tokens_as_token_ids": True}, **SAMPLING)
    prompt = chat_prompt_ids(tokenizer)
    assert reply.model_extra["prompt_token_ids"] == prompt
    out = engine_output(tiny, [prompt], n=3, max_tokens=8, top=2, raw=mode == "raw")
    for row, choice in enumerate(reply.choices):
        ids = out.completion(row)
        assert choice.model_extra["token_ids"] == ids
        entries = choice.logprobs.content
        assert [e.token for e in entries] == [f"token_id:{t}" for t in ids]
        assert [e.logprob for e in entries] == reported(out, row, raw=mode == "raw")
        assert [[(t.token, t.logprob) for t in e.top_logprobs] for e in entries] == [
            [(f"token_id:{i}", v) for i, v in top] for top in top_of(out, row)]
        assert choice.message.content == tokenizer.decode(ids, skip_special_tokens=True)
    assert reply.usage.completion_tokens == int(out.lengths.sum())


def test_tempered_and_raw_logprobs_differ_at_temperature_below_one(fp32_servers):
    replies = {mode: client(url).chat.completions.create(
        model="tiny-random", messages=HI, max_tokens=4, logprobs=True, **SAMPLING)
        for mode, (url, _) in fp32_servers.items()}
    raw, tempered = (replies[m].choices[0] for m in ("raw", "tempered"))
    assert raw.message.content == tempered.message.content  # sampling is the same
    assert all(r.logprob != t.logprob for r, t in zip(raw.logprobs.content,
                                                      tempered.logprobs.content))


def test_sdk_completions_logprobs_whole_and_streamed_equal_the_engine(fp32_servers, tiny):
    url, _ = fp32_servers["raw"]
    _, tokenizer = tiny
    prompts = ["abc", "de"]
    request = dict(model="tiny-random", prompt=prompts, n=2, max_tokens=6, logprobs=2,
                   extra_body={"return_token_ids": True}, **SAMPLING)
    whole = client(url).completions.create(**request)
    prompt_ids = [tokenizer(p).input_ids for p in prompts]
    out = engine_output(tiny, prompt_ids, n=2, max_tokens=6, top=2, raw=True)
    assert len(whole.choices) == 4
    for row, choice in enumerate(whole.choices):
        ids = out.completion(row)
        assert choice.model_extra["prompt_token_ids"] == prompt_ids[row // 2]
        assert choice.model_extra["token_ids"] == ids
        names = [tokenizer.decode([t]) for t in ids]
        lp = choice.logprobs
        assert lp.tokens == names
        assert lp.token_logprobs == reported(out, row, raw=True)
        for position, (top, name, value) in enumerate(zip(top_of(out, row), names,
                                                          lp.token_logprobs)):
            expected = {tokenizer.decode([i]): v for i, v in top}
            expected.setdefault(name, value)  # OpenAI's k + 1: the sampled token too
            assert lp.top_logprobs[position] == expected
        assert choice.text == tokenizer.decode(ids, skip_special_tokens=True)
        pieces = token_pieces(ids, choice.text, lambda t: tokenizer.decode(
            t, skip_special_tokens=True))
        assert lp.text_offset == [sum(len(p) for p in pieces[:i]) for i in range(len(ids))]

    streamed: dict[int, dict] = {}
    for chunk in client(url).completions.create(**request, stream=True):
        assert chunk.object == "text_completion"
        (choice,) = chunk.choices
        seen = streamed.setdefault(choice.index, {"text": "", "ids": [], "offsets": [],
                                                  "values": [], "finish": None})
        seen["text"] += choice.text
        seen["ids"] += choice.model_extra.get("token_ids") or []
        if choice.logprobs is not None:
            seen["offsets"] += choice.logprobs.text_offset
            seen["values"] += choice.logprobs.token_logprobs
        seen["finish"] = choice.finish_reason or seen["finish"]
    for row, choice in enumerate(whole.choices):
        seen = streamed[row]
        assert (seen["text"], seen["ids"], seen["finish"]) == (
            choice.text, choice.model_extra["token_ids"], choice.finish_reason)
        assert seen["offsets"] == choice.logprobs.text_offset
        assert seen["values"] == choice.logprobs.token_logprobs


def test_streamed_text_is_cut_at_a_stop_string_like_the_whole_one(fp32_servers):
    url, _ = fp32_servers["raw"]
    request = dict(model="tiny-random", prompt="Hello", max_tokens=20, temperature=1.0,
                   seed=5)
    text = client(url).completions.create(**request).choices[0].text
    assert len(text) >= 4, f"seed 5 should give a long enough sample, got {text!r}"
    stop = text[2:4]
    cut = client(url).completions.create(**request, stop=[stop], logprobs=0,
                                         extra_body={"return_token_ids": True})
    choice = cut.choices[0]
    assert choice.text == text[:text.find(stop)] and choice.finish_reason == "stop"
    # the tokens (and their log-probs) run up to the one that completed the stop string
    ids = choice.model_extra["token_ids"]
    assert len(ids) == len(choice.logprobs.tokens) == cut.usage.completion_tokens
    assert all(top == {name: value} for top, name, value in zip(
        choice.logprobs.top_logprobs, choice.logprobs.tokens, choice.logprobs.token_logprobs))
    streamed = list(client(url).completions.create(**request, stop=[stop], stream=True))
    assert "".join(c.choices[0].text for c in streamed) == choice.text
    assert streamed[-1].choices[0].finish_reason == "stop"


def test_raw_events_are_sse_ending_with_done_and_the_request_is_logged(fp32_servers, caplog):
    url, _ = fp32_servers["raw"]
    with caplog.at_level(logging.INFO, logger="rlvr.serve"):
        response = httpx.post(url + "/v1/chat/completions", timeout=60, json={
            "messages": HI, "max_tokens": 3, "seed": 1, "stream": True})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.text.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    assert all(e.startswith("data: {") for e in events[:-2])
    assert '"delta": {"role": "assistant", "content": ""}' in events[0]
    lines = [r.getMessage() for r in caplog.records if r.name == "rlvr.serve"]
    assert any(re.fullmatch(r"POST /v1/chat/completions 200 \d+\.\d ms tokens 21 prompt \+ "
                            r"[1-3] completion", line) for line in lines), lines


@pytest.mark.parametrize("kwargs, param", [
    (dict(logprobs=True, top_logprobs=21), "top_logprobs"),
    (dict(top_logprobs=3), "top_logprobs"),
    (dict(response_format={"type": "json_object"}), "response_format"),
    (dict(stream_options={"include_usage": True}), "stream_options"),
])
def test_sdk_raises_bad_request_naming_the_field(fp32_servers, kwargs, param):
    url, _ = fp32_servers["raw"]
    with pytest.raises(openai.BadRequestError) as caught:
        client(url).chat.completions.create(model="tiny-random", messages=HI, max_tokens=2,
                                            **kwargs)
    assert caught.value.status_code == 400
    assert caught.value.body["param"] == param
    assert caught.value.body["message"].startswith(f"{param}: ")


def test_no_op_values_of_refused_fields_are_accepted(fp32_servers):
    url, _ = fp32_servers["raw"]
    response = httpx.post(url + "/v1/chat/completions", timeout=60, json={
        "messages": HI, "max_tokens": 2, "presence_penalty": 0.0, "frequency_penalty": 0,
        "tools": [], "response_format": {"type": "text"}, "logit_bias": {}, "echo": False})
    assert response.status_code == 200, response.text


def test_the_hf_engine_serves_logprobs_too(tiny, tiny_gpt2):
    _, tokenizer = tiny
    gpt2 = tiny_gpt2
    # fp32 on every CPU: the expected log-probs below come from the fp32 model
    server = ModelServer(gpt2, tokenizer, "gpt2-tiny", precision="fp32")
    assert server.engine.name == "hf"
    with running(server) as url:
        reply = client(url).chat.completions.create(
            model="gpt2-tiny", messages=HI, max_tokens=5, logprobs=True, top_logprobs=2,
            extra_body={"return_token_ids": True}, seed=1)
    choice = reply.choices[0]
    ids = choice.model_extra["token_ids"]
    with torch.no_grad():
        logits = gpt2(torch.tensor([chat_prompt_ids(tokenizer) + ids])).logits[0].float()
    expected = torch.log_softmax(logits, -1)[-len(ids) - 1:-1]
    values = [e.logprob for e in choice.logprobs.content]
    torch.testing.assert_close(torch.tensor(values), expected[torch.arange(len(ids)),
                                                               torch.tensor(ids)],
                               atol=1e-5, rtol=0)
    assert [len(e.top_logprobs) for e in choice.logprobs.content] == [2] * len(ids)


def test_model_server_refuses_an_unknown_logprobs_mode(tiny):
    model, tokenizer = tiny
    with pytest.raises(ValueError, match="logprobs_mode: expected one of raw, tempered"):
        ModelServer(model, tokenizer, "tiny-random", logprobs_mode="processed")


def test_token_pieces_hold_back_a_partial_character_and_join_to_the_text():
    text = "h\u00e9llo\u20ac"
    ids = list(text.encode("utf-8"))  # one byte per token: é is 2 tokens, € is 3

    def decode(prefix):
        return bytes(prefix).decode("utf-8", errors="replace")

    assert token_pieces(ids, text, decode) == ["h", "", "\u00e9", "l", "l", "o", "", "",
                                               "\u20ac"]
    # a text cut before a stop string: the tokens past the cut add nothing
    assert token_pieces(ids, "h\u00e9l", decode) == ["h", "", "\u00e9", "l", "", "", "", "",
                                                     ""]
    assert token_pieces([], "", decode) == []


def test_json_logprob_floors_minus_infinity_and_refuses_nan():
    assert json_logprob(-1.5) == -1.5
    assert json_logprob(float("-inf")) == FLOOR_LOGPROB == -9999.0
    with pytest.raises(ValueError, match="not a log-probability"):
        json_logprob(float("nan"))
