"""Each vLLM / OpenAI sampling field `rlvr serve` takes changes the output as vLLM specifies
it, checked against a greedy decoder written here over the fp32 model (the rule applied to
its logits by hand); the fields it does not implement, and unknown fields, are refused."""

from __future__ import annotations

import copy
import logging

import httpx
import pytest
import torch
from serve_helpers import running

from rlvr.serve import ModelServer

HI = [{"role": "user", "content": "hi"}]
PROMPT = "Hello there"


@pytest.fixture(scope="module")
def fp32(tiny):
    """``(url, server, model, tokenizer)`` of an fp32 torch-engine server."""
    model, tokenizer = tiny
    server = ModelServer(model, tokenizer, "tiny-random", engine="torch", precision="fp32")
    with running(server) as url:
        yield url, server, model, tokenizer


def post(url: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(url + path, json=body, timeout=60)


def completion(url: str, **fields) -> dict:
    body = {"prompt": PROMPT, "temperature": 0, "max_tokens": 8, "ignore_eos": True,
            "return_token_ids": True, **fields}
    reply = post(url, "/v1/completions", body)
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]


@torch.no_grad()
def reference(model, prompt: list[int], steps: int, rule=None) -> list[int]:
    """Greedy decoding of the fp32 model with ``rule(logits, done) -> logits`` applied."""
    ids, out = list(prompt), []
    for _ in range(steps):
        logits = model(torch.tensor([ids])).logits[0, -1].float()
        if rule is not None:
            logits = rule(logits.clone(), out)
        token = int(logits.argmax())
        out.append(token)
        ids.append(token)
    return out


def prompt_ids(tokenizer, text: str = PROMPT) -> list[int]:
    return tokenizer(text).input_ids


def repetition(prompt):
    def rule(logits, done):
        seen = torch.tensor(sorted(set(prompt) | set(done)))
        values = logits[seen]
        logits[seen] = torch.where(values > 0, values / 2.5, values * 2.5)
        return logits
    return rule


def penalties(logits, done):
    for token in set(done):
        logits[token] -= 1.0 * done.count(token) + 0.5
    return logits


def bias(logits, done):
    logits[7] += 5.0
    return logits


def allowed(logits, done):
    keep = torch.zeros_like(logits, dtype=torch.bool)
    keep[30:41] = True
    return logits.masked_fill(~keep, -torch.inf)


def test_greedy_output_equals_the_reference_decoder(fp32):
    url, _, model, tokenizer = fp32
    assert completion(url)["token_ids"] == reference(model, prompt_ids(tokenizer), 8)


@pytest.mark.parametrize("fields, rule", [
    (dict(repetition_penalty=2.5), "repetition"),
    (dict(frequency_penalty=1.0, presence_penalty=0.5), penalties),
    (dict(logit_bias={"7": 5.0}), bias),
    (dict(allowed_token_ids=list(range(30, 41))), allowed),
    (dict(bad_words=["e"]), "bad_words"),
], ids=["repetition_penalty", "frequency_presence", "logit_bias", "allowed_token_ids",
        "bad_words"])
def test_logits_field_changes_greedy_output_as_specified(fp32, fields, rule):
    url, _, model, tokenizer = fp32
    prompt = prompt_ids(tokenizer)
    if rule == "repetition":
        rule = repetition(prompt)
    elif rule == "bad_words":
        banned = tokenizer.convert_tokens_to_ids("e")

        def rule(logits, done):
            logits[banned] = -torch.inf
            return logits
    expected = reference(model, prompt, 8, rule)
    assert expected != reference(model, prompt, 8)  # the field matters for this prompt
    assert completion(url, **fields)["token_ids"] == expected


def test_min_p_of_one_keeps_only_the_most_likely_token(fp32):
    url, _, model, tokenizer = fp32
    greedy = reference(model, prompt_ids(tokenizer), 8)
    for seed in (1, 2, 3):
        sampled = completion(url, temperature=1.0, seed=seed)["token_ids"]
        kept = completion(url, temperature=1.0, seed=seed, min_p=1.0)["token_ids"]
        assert kept == greedy
    assert sampled != greedy  # without min_p, sampling strays from the argmax


def test_stop_token_ids_min_tokens_and_stop_reason(fp32):
    url, _, model, tokenizer = fp32
    prompt = prompt_ids(tokenizer)
    greedy = reference(model, prompt, 8)
    stop = greedy[1]
    cut = completion(url, stop_token_ids=[stop])
    first = greedy.index(stop)
    assert cut["token_ids"] == greedy[:first + 1]
    assert (cut["finish_reason"], cut["stop_reason"]) == ("stop", stop)
    assert cut["text"] == tokenizer.decode(greedy[:first], skip_special_tokens=True)

    def held(logits, done):
        if len(done) < 4:
            logits[stop] = -torch.inf
        return logits
    late = reference(model, prompt, 8, held)
    expected = late[:late.index(stop, 4) + 1] if stop in late[4:] else late
    assert completion(url, stop_token_ids=[stop], min_tokens=4)["token_ids"] == expected
    assert stop not in expected[:4]


def test_ignore_eos_keeps_decoding_past_the_end_of_sequence(fp32):
    url, _, _, tokenizer = fp32
    eos = tokenizer.eos_token_id
    ended = completion(url, logit_bias={str(eos): 100}, ignore_eos=False)
    assert ended["token_ids"] == [eos]
    assert (ended["finish_reason"], ended["stop_reason"], ended["text"]) == ("stop", None, "")
    kept = completion(url, logit_bias={str(eos): 100}, max_tokens=4)
    assert kept["token_ids"] == [eos] * 4 and kept["finish_reason"] == "length"


def test_stop_strings_include_stop_str_and_any_number_of_them(fp32):
    url, _, _, _ = fp32
    text = completion(url, max_tokens=12)["text"]
    stop = text[3:5]
    at = text.find(stop)
    many = [f"never{i}" for i in range(10)] + [stop]
    cut = completion(url, max_tokens=12, stop=many)
    assert (cut["text"], cut["finish_reason"], cut["stop_reason"]) == (text[:at], "stop", stop)
    kept = completion(url, max_tokens=12, stop=many, include_stop_str_in_output=True)
    assert kept["text"] == text[:at + len(stop)]


def test_skip_special_tokens_false_keeps_their_text(fp32):
    url, _, _, tokenizer = fp32
    start = tokenizer.convert_tokens_to_ids("<|im_start|>")
    forced = dict(logit_bias={str(start): 100}, max_tokens=2)
    assert completion(url, **forced)["text"] == ""
    assert completion(url, **forced, skip_special_tokens=False)["text"] == "<|im_start|>" * 2


def test_max_completion_tokens_wins_over_max_tokens(fp32):
    url, _, _, _ = fp32
    reply = post(url, "/v1/chat/completions", {"messages": HI, "max_tokens": 10,
                                               "max_completion_tokens": 3, "ignore_eos": True})
    assert reply.json()["usage"]["completion_tokens"] == 3


@torch.no_grad()
def prompt_logprobs_of(model, ids: list[int]) -> torch.Tensor:
    logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1)


def test_prompt_logprobs_are_the_models_own(fp32):
    url, _, model, tokenizer = fp32
    ids = prompt_ids(tokenizer)
    got = completion(url, prompt_logprobs=2, max_tokens=1)["prompt_logprobs"]
    dist = prompt_logprobs_of(model, ids)
    assert got[0] is None and len(got) == len(ids)
    for i in range(1, len(ids)):
        entry = got[i][str(ids[i])]
        assert entry["logprob"] == pytest.approx(float(dist[i - 1, ids[i]]), abs=1e-5)
        assert entry["rank"] == int((dist[i - 1] > dist[i - 1, ids[i]]).sum()) + 1
        top = dist[i - 1].topk(2).indices.tolist()
        assert all(str(t) in got[i] for t in top)


def test_echo_with_logprobs_gives_the_prompts_logprobs_first(fp32):
    url, _, model, tokenizer = fp32
    ids = prompt_ids(tokenizer)
    choice = completion(url, echo=True, logprobs=1, max_tokens=1)
    assert choice["text"].startswith(PROMPT) and len(choice["text"]) == len(PROMPT) + 1
    logprobs = choice["logprobs"]
    assert len(logprobs["token_logprobs"]) == len(ids) + 1
    assert logprobs["token_logprobs"][0] is None and logprobs["top_logprobs"][0] is None
    dist = prompt_logprobs_of(model, ids)
    expected = dist[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    torch.testing.assert_close(torch.tensor(logprobs["token_logprobs"][1:len(ids)]),
                               expected, atol=1e-5, rtol=0)
    only = completion(url, echo=True, max_tokens=0, prompt=ids)
    assert only["text"] == tokenizer.decode(ids) and only["token_ids"] == []


def test_token_id_prompts_equal_their_text(fp32):
    url, _, _, tokenizer = fp32
    other = "Bye"
    texts = post(url, "/v1/completions", {"prompt": [PROMPT, other], "temperature": 0,
                                          "max_tokens": 5}).json()
    ids = post(url, "/v1/completions", {"prompt": [prompt_ids(tokenizer),
                                                   prompt_ids(tokenizer, other)],
                                        "temperature": 0, "max_tokens": 5}).json()
    one = completion(url, prompt=prompt_ids(tokenizer), max_tokens=5, ignore_eos=False)
    assert [c["text"] for c in ids["choices"]] == [c["text"] for c in texts["choices"]]
    assert one["text"] == texts["choices"][0]["text"]
    assert ids["usage"] == texts["usage"]


def test_truncate_prompt_tokens_keeps_the_prompts_end(fp32):
    url, _, _, tokenizer = fp32
    ids = prompt_ids(tokenizer)
    cut = completion(url, truncate_prompt_tokens=3)
    assert cut["prompt_token_ids"] == ids[-3:]
    assert cut["token_ids"] == completion(url, prompt=ids[-3:])["token_ids"]


def chat_ids(url: str, **fields) -> list[int]:
    reply = post(url, "/v1/chat/completions", {"max_tokens": 1, "return_token_ids": True,
                                               **fields})
    assert reply.status_code == 200, reply.text
    return reply.json()["prompt_token_ids"]


def test_chat_template_fields(fp32, tiny):
    url, _, _, tokenizer = fp32
    said = HI + [{"role": "assistant", "content": "I am"}]

    def template(messages, **kw):
        return tokenizer(tokenizer.apply_chat_template(messages, tokenize=False, **kw),
                         add_special_tokens=False).input_ids
    assert chat_ids(url, messages=HI) == template(HI, add_generation_prompt=True)
    assert chat_ids(url, messages=HI, add_generation_prompt=False) == template(HI)
    assert chat_ids(url, messages=said, add_generation_prompt=False,
                    continue_final_message=True) == template(said, continue_final_message=True)
    assert tokenizer.decode(chat_ids(url, messages=said, add_generation_prompt=False,
                                     continue_final_message=True)).endswith("I am")
    both = post(url, "/v1/chat/completions", {"messages": said, "continue_final_message": True})
    assert both.json()["error"]["param"] == "continue_final_message"

    model, _ = tiny
    greeting = copy.deepcopy(tokenizer)
    greeting.chat_template = "{% if greeting %}{{ greeting }}{% endif %}" + \
        tokenizer.chat_template
    with running(ModelServer(model, greeting, "tiny-random")) as other:
        plain = chat_ids(other, messages=HI)
        told = chat_ids(other, messages=HI, chat_template_kwargs={"greeting": "Hey"})
    assert told == tokenizer("Hey", add_special_tokens=False).input_ids + plain


@pytest.mark.parametrize("field, value", [
    ("guided_json", {"type": "object"}), ("guided_regex", "a+"), ("guided_choice", ["a"]),
    ("guided_grammar", "root ::= 'a'"), ("structured_outputs", {"json": {}}),
    ("response_format", {"type": "json_schema"}), ("functions", [{"name": "f"}]),
    ("function_call", "auto"), ("tools", [{"type": "function"}]), ("use_beam_search", True),
    ("best_of", 2), ("chat_template", "{{ messages }}"),
])
def test_unimplemented_fields_are_refused_naming_them(served, field, value):
    url, _ = served
    reply = post(url, "/v1/chat/completions", {"messages": HI, "max_tokens": 1, field: value})
    assert reply.status_code == 400 and reply.json()["error"]["param"] == field


def test_unknown_fields_are_refused_unless_ignored(served, tiny, caplog):
    url, _ = served
    body = {"prompt": "a", "max_tokens": 1, "frobnicate": 1, "zeta": True}
    reply = post(url, "/v1/completions", body)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == "frobnicate" and "frobnicate, zeta" in error["message"]
    model, tokenizer = tiny
    with running(ModelServer(model, tokenizer, "tiny-random",
                             ignore_unknown_fields=True)) as lenient:
        with caplog.at_level(logging.WARNING, logger="rlvr.serve"):
            assert post(lenient, "/v1/completions", body).status_code == 200
    assert any("frobnicate, zeta" in r.getMessage() for r in caplog.records)


def test_the_hf_engine_applies_the_fields_and_stops_rows_through_its_hooks(tiny, tiny_gpt2):
    _, tokenizer = tiny
    server = ModelServer(tiny_gpt2, tokenizer, "gpt2-tiny", precision="fp32")
    assert server.engine.name == "hf"
    prompt = prompt_ids(tokenizer)
    expected = reference(tiny_gpt2, prompt, 6, repetition(prompt))
    with running(server) as url:
        penalised = completion(url, max_tokens=6, repetition_penalty=2.5, n=2)
        stop = expected[2]
        cut = completion(url, max_tokens=6, repetition_penalty=2.5, stop_token_ids=[stop])
    assert penalised["token_ids"] == expected
    assert cut["token_ids"] == expected[:expected.index(stop) + 1]
    assert (cut["finish_reason"], cut["stop_reason"]) == ("stop", stop)
