"""Reported log-probs (``SamplingParams.top_logprobs`` / ``raw_logprobs``) of the ``torch`` and
``hf`` engines: sampling is unchanged by asking for them, and the values equal a teacher-forced
transformers forward pass over the sampled completions."""

import pytest
import torch

from rlvr.rollout import HFEngine, RolloutOutput, SamplingParams, TorchEngine
from rlvr.rollout.types import SamplingParamsError
from rlvr.rollout.vllm_convert import vllm_sampling_kwargs

EOS = 2  # "<|im_end|>" in the tiny tokenizer
BASE = dict(temperature=0.7, top_p=0.9, max_new_tokens=12, n=2, seed=5, stop_token_ids=(EOS,))


def engines(model):
    return {"torch": TorchEngine(model, dtype=torch.float32), "hf": HFEngine(model)}


def forward_logits(model, prompt: list[int], completion: list[int]) -> torch.Tensor:
    """FloatTensor[len(completion), V]: logits predicting each completion token."""
    ids = torch.tensor([prompt + completion])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0].float()
    return logits[len(prompt) - 1: len(prompt) - 1 + len(completion)]


@pytest.mark.parametrize("name", ["torch", "hf"])
def test_asking_for_reported_logprobs_leaves_the_samples_unchanged(tiny, prompts, name):
    model, _ = tiny
    engine = engines(model)[name]
    plain = engine.generate(prompts, SamplingParams(**BASE))
    reported = engine.generate(prompts, SamplingParams(**BASE, top_logprobs=4,
                                                       raw_logprobs=True))
    assert plain.raw_logprobs is None and plain.top_token_ids is None
    assert torch.equal(plain.completion_ids, reported.completion_ids)
    assert torch.equal(plain.logprobs, reported.logprobs)
    assert plain.finish_reason == reported.finish_reason
    n_rows, width = reported.completion_ids.shape
    assert reported.raw_logprobs.shape == (n_rows, width)
    assert reported.top_token_ids.shape == reported.top_logprobs.shape == (n_rows, width, 4)


@pytest.mark.parametrize("name", ["torch", "hf"])
@pytest.mark.parametrize("raw", [True, False], ids=["raw", "tempered"])
def test_reported_logprobs_equal_a_teacher_forced_forward(tiny, prompts, name, raw):
    model, _ = tiny
    params = SamplingParams(**BASE, top_logprobs=3, raw_logprobs=raw)
    out = engines(model)[name].generate(prompts, params)
    for row in range(out.num_rows):
        completion = out.completion(row)
        logits = forward_logits(model, prompts[int(out.prompt_index[row])], completion)
        scale = 1.0 if raw else params.temperature
        expected = torch.log_softmax(logits / scale, dim=-1)
        values, ids = expected.topk(3, dim=-1)
        length = len(completion)
        assert torch.equal(out.top_token_ids[row, :length], ids)
        torch.testing.assert_close(out.top_logprobs[row, :length], values, atol=1e-4, rtol=0)
        assert bool((out.top_logprobs[row, length:] == 0).all())
        tokens = torch.tensor(completion)
        tempered = torch.log_softmax(logits / params.temperature, -1)[torch.arange(length),
                                                                       tokens]
        torch.testing.assert_close(out.logprobs[row, :length], tempered, atol=1e-4, rtol=0)
        if raw:
            sampled = torch.log_softmax(logits, -1)[torch.arange(length), tokens]
            torch.testing.assert_close(out.raw_logprobs[row, :length], sampled, atol=1e-4,
                                       rtol=0)
        else:
            assert out.raw_logprobs is None


def test_greedy_reports_the_temperature_one_distribution(tiny, prompts):
    model, _ = tiny
    greedy = dict(BASE, temperature=0)
    tempered = TorchEngine(model, dtype=torch.float32).generate(
        prompts, SamplingParams(**greedy, top_logprobs=2))
    raw = TorchEngine(model, dtype=torch.float32).generate(
        prompts, SamplingParams(**greedy, top_logprobs=2, raw_logprobs=True))
    assert torch.equal(tempered.top_logprobs, raw.top_logprobs)
    # greedy: the sampled token is the most likely one
    assert torch.equal(raw.top_token_ids[..., 0][raw.completion_mask],
                       raw.completion_ids[raw.completion_mask])


def test_sampling_params_check_the_new_fields():
    with pytest.raises(SamplingParamsError, match="top_logprobs"):
        SamplingParams(top_logprobs=-1)
    with pytest.raises(SamplingParamsError, match="raw_logprobs"):
        SamplingParams(raw_logprobs=1)
    assert not SamplingParams().reports_logprobs
    assert SamplingParams(raw_logprobs=True).reports_logprobs


def test_rollout_output_checks_reported_shapes():
    ids = torch.zeros(2, 3, dtype=torch.long)
    common = dict(completion_ids=ids, completion_mask=ids.bool(), logprobs=ids.float(),
                  prompt_index=torch.zeros(2, dtype=torch.long), finish_reason=["stop"] * 2,
                  lengths=torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="raw_logprobs"):
        RolloutOutput(**common, raw_logprobs=torch.zeros(2, 4))
    with pytest.raises(ValueError, match="come together"):
        RolloutOutput(**common, top_token_ids=torch.zeros(2, 3, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="top_logprobs"):
        RolloutOutput(**common, top_token_ids=torch.zeros(2, 3, 1, dtype=torch.long),
                      top_logprobs=torch.zeros(2, 3))


def test_vllm_engine_refuses_reported_logprobs():
    with pytest.raises(ValueError, match="vllm engine does not report"):
        vllm_sampling_kwargs(SamplingParams(top_logprobs=2), seed=0)
