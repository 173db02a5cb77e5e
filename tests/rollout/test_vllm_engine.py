"""The ``vllm`` engine. Without vLLM or a GPU: the SamplingParams mapping, the RequestOutput ->
RolloutOutput conversion and the weight-sync / sleep logic, on small stand-ins shaped like
vLLM's objects. With a CUDA GPU and vLLM installed: greedy output equals the ``hf`` engine's,
and ``update_weights`` reaches the running model (``scripts/gpu_check.sh`` runs that part)."""

from __future__ import annotations

import copy
import importlib.util
import os
import subprocess
import sys
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

from rlvr.rollout import RolloutEngine, SamplingParams, create_engine, engine_names
from rlvr.rollout.vllm_convert import (
    build_sampling_params,
    request_outputs_to_rollout,
    sampled_token_logprobs,
    vllm_sampling_kwargs,
)
from rlvr.rollout.vllm_engine import INSTALL_HINT, VLLMEngine, parse_version
from rlvr.rollout.vllm_weights import find_inprocess_model

HAS_VLLM = importlib.util.find_spec("vllm") is not None


# -- stand-ins shaped like vLLM's outputs ----------------------------------------------------
@dataclass
class Logprob:
    """Like ``vllm.sequence.Logprob``."""

    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    """Like ``vllm.outputs.CompletionOutput``."""

    index: int
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None
    text: str = ""


@dataclass
class RequestOutput:
    """Like ``vllm.outputs.RequestOutput``."""

    prompt_token_ids: list[int]
    outputs: list[CompletionOutput]
    metrics: object = None


def completion(index, ids, reason, extra_top=False):
    """A completion whose token t has log-prob -(t + 1) / 10 (and, with ``extra_top``, a
    top-1 entry for another token, as ``logprobs=1`` returns)."""
    lps = []
    for t in ids:
        entry = {t: Logprob(-(t + 1) / 10, rank=2)}
        if extra_top:
            entry[999] = Logprob(-0.01, rank=1)
        lps.append(entry)
    return CompletionOutput(index, list(ids), lps, reason)


def fake_sp(**kwargs):
    """``vllm.SamplingParams`` stand-in: returns its keyword arguments."""
    return dict(kwargs)


class FakeVLLMModel:
    """The vLLM-side model: records ``load_weights`` calls."""

    def __init__(self):
        self.loads: list[list[str]] = []
        self.tensors: dict[str, torch.Tensor] = {}

    def load_weights(self, weights):
        weights = list(weights)
        self.loads.append([name for name, _ in weights])
        self.tensors = {name: t.clone() for name, t in weights}


@dataclass
class FakeLLM:
    """An ``LLM`` whose engine runs in process (V0 layout): ``generate`` answers with
    completions [prompt[-1] + 1, ..., stop] for each row, recording the calls."""

    stop_at: int = 3
    calls: list = field(default_factory=list)
    events: list = field(default_factory=list)
    model: FakeVLLMModel = field(default_factory=FakeVLLMModel)

    def __post_init__(self):
        runner = SimpleNamespace(model=self.model)
        self.llm_engine = SimpleNamespace(
            model_executor=SimpleNamespace(driver_worker=SimpleNamespace(model_runner=runner)))

    def generate(self, prompts, sampling_params=None, use_tqdm=True):
        self.calls.append((prompts, sampling_params))
        self.events.append("generate")
        out = []
        for prompt, sp in zip(prompts, sampling_params):
            ids = prompt["prompt_token_ids"]
            comps = []
            for k in range(sp["n"]):
                toks = [(ids[-1] + j + k) % 50 for j in range(1, self.stop_at + 1)]
                reason = "length" if len(toks) >= sp["max_tokens"] else "stop"
                comps.append(completion(k, toks[: sp["max_tokens"]], reason))
            out.append(RequestOutput(ids, list(reversed(comps))))  # out of index order
        return out

    def reset_prefix_cache(self):
        self.events.append("reset_prefix_cache")

    def sleep(self, level=1):
        self.events.append(f"sleep{level}")

    def wake_up(self, tags=None):
        self.events.append("wake_up")


class RPCOnlyLLM(FakeLLM):
    """An ``LLM`` whose engine runs in another process: only ``collective_rpc`` reaches the
    workers (V1 with multiprocessing)."""

    def __post_init__(self):
        self.worker = SimpleNamespace(model_runner=SimpleNamespace(model=self.model))

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.events.append("collective_rpc")
        return [method(self.worker, *args, **(kwargs or {}))]


# -- SamplingParams mapping --------------------------------------------------------------------
def test_sampling_kwargs_map_every_field():
    params = SamplingParams(temperature=0.7, top_p=0.9, top_k=20, max_new_tokens=64,
                            stop_token_ids=(5, 2), n=8, seed=3)
    kw = vllm_sampling_kwargs(params, seed=11)
    assert kw == {"n": 8, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "max_tokens": 64,
                  "min_tokens": 0, "stop_token_ids": [2, 5], "ignore_eos": True,
                  "logprobs": 0, "detokenize": False, "seed": 11}


def test_sampling_kwargs_disabled_top_k_and_greedy():
    assert vllm_sampling_kwargs(SamplingParams(top_k=0), seed=1)["top_k"] == -1
    greedy = vllm_sampling_kwargs(SamplingParams(temperature=0, n=4, seed=9), seed=9)
    assert greedy["n"] == 1 and greedy["temperature"] == 0.0 and greedy["seed"] is None


def test_per_prompt_seeds_give_every_row_its_own_seed():
    params = SamplingParams(n=4, seed=100)
    sps = build_sampling_params(fake_sp, params, num_prompts=3)
    assert [sp["seed"] for sp in sps] == [100, 104, 108]  # V1 child k adds k: 100..111
    unseeded = build_sampling_params(fake_sp, params, 3, per_request_seed=False)
    assert all(sp["seed"] is None for sp in unseeded)
    # seed=None draws from torch's global generator: reproducible under manual_seed
    torch.manual_seed(0)
    a = build_sampling_params(fake_sp, SamplingParams(n=2), 2)
    torch.manual_seed(0)
    b = build_sampling_params(fake_sp, SamplingParams(n=2), 2)
    assert a == b


def test_parse_version():
    assert parse_version("0.10.2") == (0, 10, 2)
    assert parse_version("0.11.0rc2.dev14+gabc") == (0, 11, 0)
    assert parse_version("0.6.3.post1") == (0, 6, 3)
    assert parse_version("1") == (1, 0, 0)


# -- RequestOutput -> RolloutOutput ----------------------------------------------------------------
def test_conversion_pads_masks_and_orders_rows():
    params = SamplingParams(temperature=1.0, n=2, max_new_tokens=4, stop_token_ids=(7,))
    outputs = [
        RequestOutput([1, 2], [completion(1, [4, 5, 6, 9], "length"),
                               completion(0, [3, 7], "stop", extra_top=True)]),
        RequestOutput([8], [completion(0, [7], "stop"), completion(1, [2, 2, 7], "stop")]),
    ]
    out = request_outputs_to_rollout(outputs, params, pad_token_id=0)
    assert out.completion_ids.tolist() == [[3, 7, 0, 0], [4, 5, 6, 9], [7, 0, 0, 0], [2, 2, 7, 0]]
    assert out.completion_mask.tolist() == [[True, True, False, False], [True] * 4,
                                            [True, False, False, False], [True, True, True, False]]
    assert out.finish_reason == ["stop", "length", "stop", "stop"]
    assert out.lengths.tolist() == [2, 4, 1, 3]
    assert out.prompt_index.tolist() == [0, 0, 1, 1]
    assert out.logprobs.dtype == torch.float32
    expected = torch.tensor([[-0.4, -0.8, 0, 0], [-0.5, -0.6, -0.7, -1.0],
                             [-0.8, 0, 0, 0], [-0.3, -0.3, -0.8, 0]])
    torch.testing.assert_close(out.logprobs, expected)  # the sampled token's, not the top-1's
    assert out.timing.tokens_generated == 10
    assert out.completion(1) == [4, 5, 6, 9]


def test_greedy_completion_is_repeated_n_times():
    params = SamplingParams(temperature=0, n=3, max_new_tokens=5)
    out = request_outputs_to_rollout([RequestOutput([1], [completion(0, [4, 4], "stop")])],
                                     params, pad_token_id=9)
    assert out.completion_ids.tolist() == [[4, 4]] * 3
    assert out.prompt_index.tolist() == [0, 0, 0]


def test_conversion_rejects_malformed_outputs():
    params = SamplingParams(n=2)
    with pytest.raises(ValueError, match="1 completions for prompt 0, expected 2"):
        request_outputs_to_rollout([RequestOutput([1], [completion(0, [3], "stop")])], params, 0)
    aborted = [RequestOutput([1], [completion(0, [3], "abort"), completion(1, [3], "stop")])]
    with pytest.raises(ValueError, match="abort"):
        request_outputs_to_rollout(aborted, params, 0)
    with pytest.raises(ValueError, match="no log-probs"):
        sampled_token_logprobs([3], None)
    with pytest.raises(ValueError, match="lack the sampled token 3"):
        sampled_token_logprobs([3], [{4: Logprob(-1.0)}])
    with pytest.raises(ValueError, match="2 log-prob entries for 1 tokens"):
        sampled_token_logprobs([3], [{3: Logprob(-1.0)}, {3: Logprob(-1.0)}])
    assert sampled_token_logprobs([3], [{3: -0.5}]) == [-0.5]  # plain floats accepted too


# -- the engine over stand-in LLMs --------------------------------------------------------------
def test_registered_without_importing_vllm():
    assert "vllm" in engine_names()
    code = "import sys, rlvr.rollout; assert 'vllm' not in sys.modules, 'vllm imported'"
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ})


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_missing_vllm_names_the_extra(tiny):
    model, _ = tiny
    with pytest.raises(ImportError) as info:
        create_engine("vllm", model)
    assert INSTALL_HINT in str(info.value) and "CUDA GPU" in str(info.value)


def test_generate_over_a_stand_in_llm(tiny):
    model, tokenizer = tiny
    llm = FakeLLM()
    engine = create_engine("vllm", model, pad_token_id=tokenizer.pad_token_id, llm=llm,
                           sampling_params_cls=fake_sp)
    assert isinstance(engine, VLLMEngine) and isinstance(engine, RolloutEngine)
    params = SamplingParams(temperature=1.0, n=2, max_new_tokens=8, stop_token_ids=(2,), seed=5)
    out = engine.generate([[10, 11], [20]], params)
    prompts, sps = llm.calls[-1]
    assert prompts == [{"prompt_token_ids": [10, 11]}, {"prompt_token_ids": [20]}]
    assert [sp["seed"] for sp in sps] == [5, 7] and sps[0]["n"] == 2
    assert out.num_rows == 4 and out.prompt_index.tolist() == [0, 0, 1, 1]
    assert out.completion(0) == [12, 13, 14] and out.completion(1) == [13, 14, 15]
    assert out.timing.total_seconds > 0
    assert llm.model.loads == []  # weights unchanged since the engine was built: no push
    with pytest.raises(ValueError, match="outside"):
        engine.generate([[10, 10_000]], params)


def test_update_weights_pushes_in_place_only_when_changed(tiny):
    model = copy.deepcopy(tiny[0])
    llm = FakeLLM()
    engine = VLLMEngine(model, llm=llm, sampling_params_cls=fake_sp)
    engine.update_weights(model)  # unchanged: nothing to push
    assert llm.model.loads == []
    engine.update_weights()  # None: push now
    assert llm.model.loads[-1] == list(model.state_dict())
    assert llm.events[-1] == "reset_prefix_cache"
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)
    engine.update_weights(model)  # changed in place (an optimizer step): pushed
    assert len(llm.model.loads) == 2
    torch.testing.assert_close(llm.model.tensors["model.norm.weight"], model.model.norm.weight)
    with torch.no_grad():
        model.model.norm.weight.add_(1.0)
    engine.generate([[3]], SamplingParams(max_new_tokens=2))  # generate refreshes by itself
    assert len(llm.model.loads) == 3 and llm.events[-2:] == ["reset_prefix_cache", "generate"]


def test_update_weights_from_a_state_dict_loads_the_live_model_too(tiny):
    model = copy.deepcopy(tiny[0])
    other = copy.deepcopy(model)
    with torch.no_grad():
        other.lm_head.weight.mul_(2.0)
    llm = FakeLLM()
    engine = VLLMEngine(model, llm=llm, sampling_params_cls=fake_sp)
    engine.update_weights(other.state_dict())
    torch.testing.assert_close(model.lm_head.weight, other.lm_head.weight)
    torch.testing.assert_close(llm.model.tensors["lm_head.weight"], other.lm_head.weight)
    engine.generate([[3]], SamplingParams(max_new_tokens=2))
    assert len(llm.model.loads) == 1  # the live model now matches what vLLM holds
    with pytest.raises(TypeError, match="not str"):
        engine.update_weights("weights.bin")


def test_update_weights_through_collective_rpc(tiny):
    model = copy.deepcopy(tiny[0])
    llm = RPCOnlyLLM()
    assert find_inprocess_model(llm) is None
    engine = VLLMEngine(model, llm=llm, sampling_params_cls=fake_sp)
    engine.update_weights()
    assert llm.events == ["collective_rpc", "reset_prefix_cache"]
    assert llm.model.loads[-1] == list(model.state_dict())


def test_finds_the_model_in_every_known_layout():
    target = FakeVLLMModel()
    v1_inproc = SimpleNamespace(llm_engine=SimpleNamespace(engine_core=SimpleNamespace(
        engine_core=SimpleNamespace(model_executor=SimpleNamespace(driver_worker=SimpleNamespace(
            worker=SimpleNamespace(model_runner=SimpleNamespace(get_model=lambda: target))))))))
    assert find_inprocess_model(v1_inproc) is target
    assert find_inprocess_model(FakeLLM(model=target)) is target
    assert find_inprocess_model(SimpleNamespace(llm_engine=SimpleNamespace())) is None


def test_sleep_mode_frees_between_generations(tiny):
    model = copy.deepcopy(tiny[0])
    llm = FakeLLM()
    engine = VLLMEngine(model, llm=llm, sampling_params_cls=fake_sp, enable_sleep_mode=True,
                        sleep_level=2)
    params = SamplingParams(max_new_tokens=2)
    engine.generate([[3]], params)
    assert llm.events == ["generate", "sleep2"]
    engine.generate([[3]], params)  # level 2 dropped the weights: wake, push, generate, sleep
    assert llm.events[2:] == ["wake_up", "reset_prefix_cache", "generate", "sleep2"]
    assert len(llm.model.loads) == 1
    with pytest.raises(ValueError, match="sleep_level"):
        VLLMEngine(model, llm=llm, sampling_params_cls=fake_sp, sleep_level=3)


@pytest.mark.parametrize("version, use_v1, mode_arg, semantics", [
    ((0, 11, 0), None, True, "processed_logprobs"),
    ((0, 9, 2), None, False, "raw_logprobs"),
    ((0, 9, 2), "0", False, "processed_logprobs"),
    ((0, 6, 3), None, False, "processed_logprobs"),
])
def test_llm_arguments_by_vllm_version(tiny, monkeypatch, version, use_v1, mode_arg, semantics):
    model = tiny[0]
    for name in ("VLLM_ENABLE_V1_MULTIPROCESSING", "VLLM_USE_V1"):
        monkeypatch.setenv(name, "x")  # recorded, so the test's changes are undone
        monkeypatch.delenv(name)
    if use_v1 is not None:
        monkeypatch.setenv("VLLM_USE_V1", use_v1)
    engine = VLLMEngine(model, llm=FakeLLM(), sampling_params_cls=fake_sp)
    seen = []
    fake_vllm = SimpleNamespace(LLM=lambda **kw: seen.append(kw) or FakeLLM())
    engine._build_llm(fake_vllm, model, version, gpu_memory_utilization=0.3, dtype="bfloat16",
                      max_model_len=256, enforce_eager=True, seed=0, in_process=True,
                      llm_kwargs={"max_num_seqs": 64})
    kw = seen[-1]
    assert ("logprobs_mode" in kw) == mode_arg and engine.logprobs_mode == semantics
    assert kw["skip_tokenizer_init"] is True and kw["max_num_seqs"] == 64
    assert kw["gpu_memory_utilization"] == 0.3 and kw["max_model_len"] == 256
    assert "enable_sleep_mode" not in kw  # only passed when asked for (vLLM >= 0.7.3)
    assert os.path.isfile(os.path.join(kw["model"], "config.json"))  # the live model, exported
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    if semantics == "raw_logprobs":
        engine.vllm_version = version
        with pytest.warns(UserWarning, match="temperature 1"):
            engine.generate([[3]], SamplingParams(temperature=0.7, max_new_tokens=2))
    engine.close()
    assert not os.path.exists(kw["model"])


# -- on a GPU with vLLM -------------------------------------------------------------------------
needs_gpu = pytest.mark.skipif(not (HAS_VLLM and torch.cuda.is_available()),
                               reason="needs vLLM and a CUDA GPU (scripts/gpu_check.sh)")


@pytest.fixture(scope="module")
def gpu_setup():
    """The default model (fp32 on CPU, the policy) and a vLLM engine over it in fp32."""
    from rlvr.models import DEFAULT_MODEL, load_model_and_tokenizer
    from rlvr.tasks.prompting import stop_token_ids

    model, tokenizer = load_model_and_tokenizer(DEFAULT_MODEL)
    model.eval()
    engine = VLLMEngine(model, pad_token_id=tokenizer.pad_token_id,
                        dtype=os.environ.get("RLVR_VLLM_TEST_DTYPE", "float32"),
                        gpu_memory_utilization=0.25, enforce_eager=True, max_model_len=1024)
    questions = ["What is 12 + 34?", "What is 71 - 18? Answer as #### N.", "Say hello."]
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": q}],
                                             add_generation_prompt=True, tokenize=False)
               for q in questions]
    prompts = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
    yield model, engine, prompts, stop_token_ids(tokenizer)
    engine.close()


@needs_gpu
def test_gpu_greedy_matches_hf_token_for_token(gpu_setup):
    from rlvr.rollout import HFEngine

    model, engine, prompts, stops = gpu_setup
    params = SamplingParams(temperature=0, max_new_tokens=32, n=2, stop_token_ids=stops)
    ours = engine.generate(prompts, params)
    ref = HFEngine(model).generate(prompts, params)
    assert ours.completion_ids.tolist() == ref.completion_ids.tolist()
    assert ours.finish_reason == ref.finish_reason
    torch.testing.assert_close(ours.logprobs, ref.logprobs, atol=2e-2, rtol=0)
    sampled = engine.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=16, n=4,
                                                      seed=1, stop_token_ids=stops))
    assert sampled.num_rows == 12 and bool((sampled.logprobs <= 0).all())
    again = engine.generate(prompts, SamplingParams(temperature=1.0, max_new_tokens=16, n=4,
                                                    seed=1, stop_token_ids=stops))
    assert torch.equal(sampled.completion_ids, again.completion_ids)  # seeded: reproducible


@needs_gpu
def test_gpu_update_weights_changes_outputs(gpu_setup):
    from rlvr.rollout import HFEngine

    model, engine, prompts, stops = gpu_setup
    params = SamplingParams(temperature=0, max_new_tokens=24, stop_token_ids=stops)
    before = engine.generate(prompts, params)
    original = {k: v.clone() for k, v in model.state_dict().items()}
    perturbed = copy.deepcopy(model)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in perturbed.parameters():
            if p.dim() >= 2:
                p.add_(torch.randn(p.shape, generator=generator) * 0.01)
    engine.update_weights(perturbed)  # loads into the live model and pushes, no reload
    after = engine.generate(prompts, params)
    assert after.completion_ids.tolist() != before.completion_ids.tolist()
    ref = HFEngine(model).generate(prompts, params)  # the live model now holds the perturbation
    assert after.completion_ids.tolist() == ref.completion_ids.tolist()
    engine.update_weights(original)
    restored = engine.generate(prompts, params)
    assert restored.completion_ids.tolist() == before.completion_ids.tolist()
