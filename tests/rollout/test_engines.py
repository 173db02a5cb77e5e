"""The ``torch`` engine against the ``hf`` reference and against exact forward passes, on the
tiny model (the default model's check is the slow test at the end)."""

import pytest
import torch

from rlvr.rollout import (
    HFEngine,
    RolloutEngine,
    SamplingParams,
    TorchEngine,
    UnknownEngineError,
    create_engine,
    engine_names,
)

from .conftest import chi_square_p_value

EOS = 2  # "<|im_end|>" in the tiny tokenizer


def test_registry_knows_both_engines_and_suggests_names(tiny):
    model, _ = tiny
    assert {"hf", "torch"} <= set(engine_names())
    engine = create_engine("torch", model)
    assert isinstance(engine, TorchEngine) and isinstance(engine, RolloutEngine)
    assert isinstance(create_engine("hf", model), HFEngine)
    with pytest.raises(UnknownEngineError, match="did you mean 'torch'"):
        create_engine("torhc", model)


@pytest.mark.parametrize("dtype, shared", [(torch.float32, True), (torch.float32, False),
                                           (torch.bfloat16, False)],
                         ids=["fp32-shared", "fp32-expanded", "bf16-expanded"])
def test_greedy_matches_hf_token_for_token(tiny, prompts, dtype, shared):
    """fp32: either cache layout; bf16: the expanded layout reproduces transformers' kernels
    bit for bit (the cascade merge of the shared layout rounds differently)."""
    model, _ = tiny
    params = SamplingParams(temperature=0, max_new_tokens=24, n=2, stop_token_ids=(EOS,))
    ours = TorchEngine(model, dtype=dtype, shared_prefix=shared).generate(prompts, params)
    ref = HFEngine(model, dtype=None if dtype == torch.float32 else dtype).generate(prompts, params)
    assert torch.equal(ours.completion_ids, ref.completion_ids)
    assert ours.finish_reason == ref.finish_reason
    assert "stop" in ours.finish_reason and "length" in ours.finish_reason  # both paths hit
    assert torch.equal(ours.lengths, ref.lengths)
    assert ours.prompt_index.tolist() == [0, 0, 1, 1, 2, 2]
    tol = 1e-4 if dtype == torch.float32 else 0.1
    torch.testing.assert_close(ours.logprobs, ref.logprobs, atol=tol, rtol=0)


def test_left_padding_does_not_change_a_prompts_completion(tiny, prompts):
    """Position ids come from the real prompt length: batched with longer prompts (left-padded)
    or alone, a prompt gets the same greedy completion."""
    model, _ = tiny
    engine = TorchEngine(model, dtype=torch.float32)
    params = SamplingParams(temperature=0, max_new_tokens=16)
    batched = engine.generate(prompts, params)
    for i, prompt in enumerate(prompts):
        alone = engine.generate([prompt], params)
        assert batched.completion(i) == alone.completion(0)


def test_first_token_distribution_matches_exact_softmax(tiny, prompts):
    model, _ = tiny
    temperature = 1.3
    draws = 8000
    out = TorchEngine(model).generate(
        [prompts[0]], SamplingParams(temperature=temperature, max_new_tokens=1, n=draws, seed=3))
    with torch.no_grad():
        logits = model(torch.tensor([prompts[0]])).logits[0, -1]
    exact = torch.softmax(logits.double() / temperature, -1)
    counts = torch.bincount(out.completion_ids[:, 0], minlength=exact.numel())
    assert chi_square_p_value(counts, exact) > 1e-3
    # and a wrong temperature is rejected by the same test
    assert chi_square_p_value(counts, torch.softmax(logits.double(), -1)) < 1e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("top_p, top_k", [(1.0, 0), (0.9, 0), (1.0, 10)])
def test_logprobs_equal_fresh_forward_at_temperature(tiny, prompts, top_p, top_k, dtype):
    """Returned logprobs = log_softmax(logits / T) of the sampled tokens under a fresh fp32
    teacher-forced forward pass (untruncated by top-p / top-k): to fp32 rounding with fp32
    weights, within bf16 rounding of the logits (|logits| ~ 10 here) with bf16 weights."""
    model, _ = tiny
    temperature = 1.2
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k,
                            max_new_tokens=20, n=3, seed=5, stop_token_ids=(EOS,))
    out = TorchEngine(model, dtype=dtype).generate(prompts, params)
    errors = []
    for row in range(out.num_rows):
        prompt = prompts[int(out.prompt_index[row])]
        completion = out.completion(row)
        ids = torch.tensor([prompt + completion])
        with torch.no_grad():
            logits = model(ids).logits[0, len(prompt) - 1: -1].float()
        exact = torch.log_softmax(logits / temperature, -1).gather(
            1, torch.tensor(completion)[:, None])[:, 0]
        errors.append(out.logprobs[row, : len(completion)] - exact)
        assert torch.all(out.logprobs[row, len(completion):] == 0)
    errors = torch.cat(errors).abs()
    if dtype == torch.float32:
        assert errors.max() < 1e-4
    else:
        # bf16 weights: per-token errors are heavy-tailed (over seeds the max ranges 0.1-0.4
        # for either attention path); the mean is the stable measure.
        assert errors.max() < 0.6 and errors.mean() < 0.04


def test_stop_tokens_and_length_limit(tiny, prompts):
    model, _ = tiny
    engine = TorchEngine(model)
    out = engine.generate(prompts, SamplingParams(temperature=1.5, max_new_tokens=30, n=8,
                                                  seed=0, stop_token_ids=(EOS,)))
    for row in range(out.num_rows):
        ids = out.completion(row)
        if out.finish_reason[row] == "stop":
            assert ids[-1] == EOS and EOS not in ids[:-1]
        else:
            assert len(ids) == 30 and EOS not in ids
        assert int(out.completion_mask[row].sum()) == len(ids) == int(out.lengths[row])
        assert torch.all(out.completion_ids[row, len(ids):] == engine.pad_token_id)
    assert set(out.finish_reason) == {"stop", "length"}
    assert out.timing.tokens_generated == int(out.lengths.sum())
    # Without stop tokens every row runs to max_new_tokens.
    capped = engine.generate(prompts, SamplingParams(max_new_tokens=7, n=2, seed=0))
    assert capped.completion_ids.shape == (6, 7) and capped.finish_reason == ["length"] * 6


def test_hf_timing_covers_its_log_prob_pass(tiny, prompts):
    """The hf engine's extra teacher-forced pass is part of the call's timing (a rollout that
    returns log-probs is not finished before they exist); without it, nothing is added."""
    import time

    model, _ = tiny
    params = SamplingParams(temperature=1.0, max_new_tokens=6, n=2, seed=0)
    start = time.perf_counter()
    out = HFEngine(model).generate(prompts, params)
    wall = time.perf_counter() - start
    timing = out.timing
    assert timing.logprob_seconds > 0
    assert timing.total_seconds == pytest.approx(
        timing.prefill_seconds + timing.decode_seconds + timing.logprob_seconds)
    assert timing.total_seconds <= wall
    bare = HFEngine(model, compute_logprobs=False).generate(prompts, params).timing
    assert bare.logprob_seconds == 0.0


def test_same_seed_same_completions_other_seed_differs(tiny, prompts):
    model, _ = tiny
    engine = TorchEngine(model)

    def run(seed):
        return engine.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=12, n=4,
                                                       seed=seed, stop_token_ids=(EOS,)))

    a, b, c = run(11), run(11), run(12)
    assert torch.equal(a.completion_ids, b.completion_ids)
    assert torch.equal(a.logprobs, b.logprobs)
    assert not torch.equal(a.completion_ids, c.completion_ids)
    # the n samples of a prompt are distinct draws, not copies
    assert len({tuple(a.completion(r)) for r in range(4)}) > 1


def test_compaction_and_buckets_do_not_change_greedy_output(tiny, prompts):
    model, _ = tiny
    params = SamplingParams(temperature=0, max_new_tokens=24, n=2, stop_token_ids=(EOS,))
    plain = TorchEngine(model, dtype=torch.float32, compact_fraction=2.0).generate(prompts, params)
    compacting = TorchEngine(model, dtype=torch.float32, compact_fraction=0.01)
    bucketed = TorchEngine(model, dtype=torch.float32, max_batch_size=2)
    for other in (compacting.generate(prompts, params), bucketed.generate(prompts, params)):
        assert torch.equal(other.completion_ids, plain.completion_ids)
        assert other.finish_reason == plain.finish_reason


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 1e-4), (torch.bfloat16, 0.1)],
                         ids=["fp32", "bf16"])
def test_shared_prefix_cascade_equals_expanded_cache(tiny, prompts, dtype, tol):
    """Cascade attention over one prompt copy (with padding, and after rows left the batch)
    gives the expanded cache's logprobs; in fp32 also the same sampled tokens."""
    model, _ = tiny
    params = SamplingParams(temperature=1.0, max_new_tokens=24, n=3, seed=4,
                            stop_token_ids=(EOS,))
    shared = TorchEngine(model, dtype=dtype, compact_fraction=0.01).generate(prompts, params)
    expanded = TorchEngine(model, dtype=dtype, shared_prefix=False,
                           compact_fraction=0.01).generate(prompts, params)
    assert "stop" in shared.finish_reason  # rows left the batch mid-way
    if dtype == torch.float32:
        assert torch.equal(shared.completion_ids, expanded.completion_ids)
    # Compare logprobs on each row's common prefix: same contexts and same drawn tokens.
    agree = (shared.completion_ids == expanded.completion_ids).long().cumprod(1).bool()
    compared = agree & shared.completion_mask & expanded.completion_mask
    diff = (shared.logprobs - expanded.logprobs).abs()[compared]
    assert compared.sum() >= 20
    assert float(diff.max()) < tol


def test_engine_follows_in_place_weight_updates(tiny, prompts):
    model, tokenizer = tiny
    import copy

    policy = copy.deepcopy(model)
    engine = TorchEngine(policy)
    params = SamplingParams(temperature=0, max_new_tokens=10)
    before = engine.generate(prompts, params).completion_ids
    with torch.no_grad():  # an optimizer step, in place
        policy.lm_head.weight.add_(torch.randn_like(policy.lm_head.weight))
    after = engine.generate(prompts, params).completion_ids
    assert not torch.equal(before, after)
    engine.update_weights(model.state_dict())  # sync from a state_dict
    assert torch.equal(engine.generate(prompts, params).completion_ids, before)
    with pytest.raises(TypeError, match="state_dict"):
        engine.update_weights(42)


def test_bad_prompts_are_rejected(tiny):
    model, _ = tiny
    engine = TorchEngine(model)
    with pytest.raises(ValueError, match="empty"):
        engine.generate([], SamplingParams())
    with pytest.raises(ValueError, match=r"prompt_ids\[1\] is empty"):
        engine.generate([[3], []], SamplingParams())
    with pytest.raises(ValueError, match=r"prompt_ids\[0\] has token id 100"):
        engine.generate([[3, 100]], SamplingParams())


@pytest.mark.slow
def test_default_model_greedy_matches_hf_token_for_token():
    from rlvr.models import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer("smollm2-135m-instruct")
    questions = ["What is 37 + 48?", "Write a haiku about the sea.",
                 "Explain gravity in one sentence, please, for a child who is five years old.",
                 "List three primes."]
    prompts = [list(tokenizer.apply_chat_template([{"role": "user", "content": q}],
                                                  add_generation_prompt=True,
                                                  tokenize=True)["input_ids"])
               for q in questions]
    params = SamplingParams(temperature=0, max_new_tokens=48,
                            stop_token_ids=(tokenizer.eos_token_id,))
    from rlvr.models.precision import resolve_precision

    if resolve_precision("auto").bf16:  # emulated bf16 (AVX2-only CPUs) would take ~85x longer
        # bf16: the expanded-cache layout runs transformers' kernels, bit for bit.
        ours = TorchEngine(model, dtype=torch.bfloat16, shared_prefix=False).generate(prompts,
                                                                                      params)
        ref = HFEngine(model, dtype=torch.bfloat16, compute_logprobs=False).generate(prompts,
                                                                                     params)
        assert torch.equal(ours.completion_ids, ref.completion_ids)
        assert ours.finish_reason == ref.finish_reason
    # fp32: the default (shared-prefix, cascade attention) engine against fp32 transformers.
    ours = TorchEngine(model, dtype=torch.float32).generate(prompts, params)
    ref = HFEngine(model, compute_logprobs=False).generate(prompts, params)
    assert torch.equal(ours.completion_ids, ref.completion_ids)


def test_unsupported_models_are_refused_with_a_pointer_to_hf(tiny):
    from transformers import GPT2Config, GPT2LMHeadModel

    from rlvr.rollout import UnsupportedModelError

    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(UnsupportedModelError, match="use engine 'hf'"):
        TorchEngine(gpt2)
    model, _ = tiny
    import copy

    wrapped = copy.deepcopy(model)
    wrapped.model.layers[0].self_attn.q_proj.lora_A = torch.nn.Identity()  # what peft adds
    with pytest.raises(UnsupportedModelError, match="LoRA"):
        TorchEngine(wrapped)
