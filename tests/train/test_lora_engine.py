"""With ``model.lora_rank`` the run's ``torch`` engine samples the LoRA policy itself (its
snapshot merges each layer's adapters): it samples what the plain merged copy of the policy
sampled (same seed, greedy and sampled), keeps no second copy of the model, follows adapter
updates, a policy replaced or wrapped after the engine was made, and a rollback's in-place
load. The engines that run a plain module (``hf``) and the asynchronous rollout workers keep
receiving merged weights."""

from __future__ import annotations

import copy
import gc
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from transformers import LlamaForCausalLM  # noqa: E402

from rlvr.configio import load_config  # noqa: E402
from rlvr.distributed.async_rollout import pack_state, unpack_state  # noqa: E402
from rlvr.distributed.ray_actors import RolloutWorker  # noqa: E402
from rlvr.models.lora import merged_copy, merged_state_dict  # noqa: E402
from rlvr.models.tiny import spread_weights, tiny_model, tiny_tokenizer  # noqa: E402
from rlvr.rollout import SamplingParams, TorchEngine, create_engine  # noqa: E402
from rlvr.rollout.decoder.support import merged_weight  # noqa: E402
from rlvr.train.async_source import worker_weights  # noqa: E402
from rlvr.train.config import RunConfig  # noqa: E402
from rlvr.train.policy import sync_engine  # noqa: E402
from rlvr.train.rundir import plain_policy  # noqa: E402
from rlvr.train.setup import (  # noqa: E402
    apply_lora,
    grpo_rollout_engine,
    make_engine,
    open_engine,
    replace_policy,
)
from rlvr.train.state import TrainingState  # noqa: E402

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "smoke.yaml"
PROMPTS = [[5, 6, 7, 8], [9, 10, 11], [12, 13]]
PARAMS = {"greedy": SamplingParams(temperature=0.0, max_new_tokens=8, n=1, seed=0),
          "sampled": SamplingParams(temperature=1.0, max_new_tokens=8, n=3, seed=7)}


def _config(*sets: str) -> RunConfig:
    return load_config(RunConfig, SMOKE, ["model.lora_rank=4", "model.lora_alpha=8",
                                          "model.precision=fp32", *sets])


def _state(config: RunConfig) -> TrainingState:
    """A run's state after :func:`rlvr.train.setup.load` and ``open_engine``: a tiny plain
    policy (weights spread, so its samples vary) and the run's engine over it."""
    tokenizer = tiny_tokenizer()
    state = TrainingState()
    state.models.policy = spread_weights(tiny_model(tokenizer, hidden_size=64, layers=2),
                                         std=0.2)
    state.models.tokenizer = tokenizer
    open_engine(state, config)
    return state


def _update(policy, optimizer, seed: int) -> None:
    """One AdamW step on the adapters: next-token cross-entropy on random ids."""
    ids = torch.randint(4, 100, (2, 12), generator=torch.Generator().manual_seed(seed))
    logp = torch.log_softmax(policy(input_ids=ids).logits[:, :-1].float(), -1)
    loss = -logp.gather(-1, ids[:, 1:, None]).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


@torch.no_grad()
def _forward_log_probs(model, out, n: int) -> list:
    """Each row's completion log-probs from a fresh teacher-forced forward of ``model``
    (temperature 1: the sampled params' and the greedy convention)."""
    rows = []
    for r in range(out.num_rows):
        prompt, length = PROMPTS[r // n], int(out.lengths[r])
        tokens = out.completion_ids[r, :length]
        logits = model(input_ids=torch.tensor([prompt + tokens.tolist()])).logits[0]
        logp = torch.log_softmax(logits[len(prompt) - 1: len(prompt) - 1 + length].float(), -1)
        rows.append(logp.gather(1, tokens[:, None]).squeeze(1))
    return rows


def _storage_bytes(*modules) -> int:
    """Bytes of the distinct parameter and buffer storages reachable from ``modules``."""
    seen = {}
    for module in modules:
        for t in [*module.parameters(), *module.buffers()]:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return sum(seen.values())


def _llamas() -> dict:
    """The plain transformers models alive, by id (held: no id is reused meanwhile)."""
    gc.collect()
    # type(), not isinstance: isinstance reads ``__class__``, which warns on torch's deprecated
    # module-level aliases among the collected objects
    return {id(o): o for o in gc.get_objects() if issubclass(type(o), LlamaForCausalLM)}


def test_engine_samples_what_the_merged_copy_sampled_and_each_update():
    config = _config()
    state = _state(config)
    engine = state.models.engine
    # the path this replaces: a plain copy for the engine, loaded with merged weights
    old = create_engine("torch", copy.deepcopy(state.models.policy),
                        pad_token_id=state.models.tokenizer.pad_token_id, precision="fp32")
    apply_lora(state, config, "GRPO")
    policy = state.models.policy
    assert engine.model is policy  # made over the plain policy, it follows the wrapped one
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=0.05)
    first = None
    for update in range(3):  # 0: the adapters as initialised (B = 0), then 2 AdamW steps
        if update:
            _update(policy, optimizer, update)
        sync_engine(engine, policy)
        ours = {k: engine.generate(PROMPTS, p) for k, p in PARAMS.items()}
        for key, params in PARAMS.items():  # the new weights: a fresh forward's log-probs
            for r, logp in enumerate(_forward_log_probs(policy, ours[key], params.n)):
                torch.testing.assert_close(ours[key].logprobs[r, :logp.numel()], logp,
                                           rtol=0, atol=2e-5)
        old.update_weights(merged_state_dict(policy))
        for key, params in PARAMS.items():
            theirs = old.generate(PROMPTS, params)
            assert torch.equal(ours[key].completion_ids, theirs.completion_ids), key
            assert torch.equal(ours[key].lengths, theirs.lengths), key
            torch.testing.assert_close(ours[key].logprobs, theirs.logprobs, rtol=0, atol=1e-6)
        first_tokens = ours["sampled"].logprobs[:, 0]  # every row has its first token
        if first is None:
            first = first_tokens
        else:  # the update reached the engine's next rollout
            assert float((first_tokens - first).abs().max()) > 1e-3
            first = first_tokens


def test_a_lora_runs_torch_engine_holds_no_second_copy_of_the_model():
    config = _config()
    state = _state(config)
    m = state.models
    before = _llamas()
    one_copy = _storage_bytes(m.policy)
    apply_lora(state, config, "GRPO")
    sync_engine(m.engine, m.policy)
    m.engine.generate(PROMPTS, PARAMS["greedy"])
    assert m.engine.model is m.policy
    adapters = sum(p.numel() * p.element_size() for n, p in m.policy.named_parameters()
                   if "lora_" in n)
    assert adapters > 0
    assert _storage_bytes(m.policy, m.engine.model) == one_copy + adapters
    assert set(_llamas()) <= set(before)  # no plain model was built (a copy, a merged one)
    # the fp32 snapshot's embedding (tied to the head) is the policy's own tensor
    embed = m.policy.get_base_model().model.embed_tokens.weight
    assert m.engine._current_decoder().w.embed.data_ptr() == embed.data_ptr()


def test_the_hf_engine_keeps_its_plain_copy_synced_with_merged_weights():
    config = _config("rollout.engine=hf")
    state = _state(config)
    m = state.models
    apply_lora(state, config, "GRPO")
    assert m.engine.model is not m.policy and not hasattr(m.engine.model, "peft_config")
    assert _storage_bytes(m.policy, m.engine.model) > _storage_bytes(m.policy)
    optimizer = torch.optim.AdamW([p for p in m.policy.parameters() if p.requires_grad], lr=0.05)
    _update(m.policy, optimizer, 1)
    sync_engine(m.engine, m.policy)
    lora_q = m.policy.get_base_model().model.layers[0].self_attn.q_proj
    plain_q = m.engine.model.model.layers[0].self_attn.q_proj.weight
    assert torch.equal(plain_q, merged_weight(lora_q))
    assert not torch.equal(plain_q, lora_q.base_layer.weight)


def test_the_engine_follows_a_replaced_policy_and_sft_adapters_merged_before_grpo():
    config = _config()
    state = _state(config)
    m = state.models
    engine = m.engine
    apply_lora(state, config, "SFT")  # sft.full_finetune: false
    optimizer = torch.optim.AdamW([p for p in m.policy.parameters() if p.requires_grad], lr=0.05)
    _update(m.policy, optimizer, 1)
    sync_engine(engine, m.policy)
    sft = engine.generate(PROMPTS, PARAMS["sampled"])
    replace_policy(state, merged_copy(m.policy))  # what the cold start saves as sft_model/
    assert engine.model is m.policy and not hasattr(m.policy, "peft_config")
    sync_engine(engine, m.policy)
    merged = engine.generate(PROMPTS, PARAMS["sampled"])
    assert torch.equal(merged.completion_ids, sft.completion_ids)
    torch.testing.assert_close(merged.logprobs, sft.logprobs, rtol=0, atol=1e-6)
    apply_lora(state, config, "GRPO")
    assert engine.model is m.policy and hasattr(m.policy, "peft_config")


def test_a_resumed_lora_policy_and_a_rollbacks_in_place_load_are_sampled_directly():
    config = _config()
    state = _state(config)
    apply_lora(state, config, "GRPO")
    policy = state.models.policy
    optimizer = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=0.05)
    _update(policy, optimizer, 1)
    saved = {k: v.clone() for k, v in policy.state_dict().items()}  # a checkpoint
    # a resume opens the engine over the loaded LoRA policy: no plain copy
    engine = make_engine(config, policy, state.models.tokenizer)
    assert isinstance(engine, TorchEngine) and engine.model is policy
    sync_engine(engine, policy)
    at_checkpoint = engine.generate(PROMPTS, PARAMS["sampled"])
    _update(policy, optimizer, 2)
    sync_engine(engine, policy)
    moved = engine.generate(PROMPTS, PARAMS["sampled"])
    assert not torch.equal(moved.logprobs[:, 0], at_checkpoint.logprobs[:, 0])
    policy.load_state_dict(saved)  # a rollback loads the checkpoint into the policy in place
    sync_engine(engine, policy)
    back = engine.generate(PROMPTS, PARAMS["sampled"])
    assert torch.equal(back.completion_ids, at_checkpoint.completion_ids)
    assert torch.equal(back.logprobs, at_checkpoint.logprobs)


def test_async_rollout_workers_load_the_merged_weights_of_a_lora_policy():
    config = _config()
    state = _state(config)
    apply_lora(state, config, "GRPO")
    m = state.models
    plain = plain_policy(m.policy)  # what rollout_pool builds the workers' models from
    worker = RolloutWorker(type(plain), plain.config, unpack_state(*pack_state(plain)), "torch",
                           m.tokenizer.pad_token_id, {"dtype": torch.float32})
    del plain
    optimizer = torch.optim.AdamW([p for p in m.policy.parameters() if p.requires_grad], lr=0.05)
    _update(m.policy, optimizer, 1)
    worker.update_weights(unpack_state(*pack_state(worker_weights(m.policy))))  # a push
    sync_engine(m.engine, m.policy)
    for params in PARAMS.values():
        ours, theirs = m.engine.generate(PROMPTS, params), worker.generate(PROMPTS, params)
        assert torch.equal(ours.completion_ids, theirs.completion_ids)
        torch.testing.assert_close(ours.logprobs, theirs.logprobs, rtol=0, atol=1e-6)


def test_the_int8_rollout_engine_samples_the_lora_policy_as_its_merged_copy():
    if not any(e in torch.backends.quantized.supported_engines for e in ("x86", "fbgemm")):
        pytest.skip("int8 rollouts need fbgemm (x86-64 torch builds)")
    config = _config("rollout.quantization=int8")
    state = _state(config)
    apply_lora(state, config, "GRPO")
    m = state.models
    optimizer = torch.optim.AdamW([p for p in m.policy.parameters() if p.requires_grad], lr=0.05)
    _update(m.policy, optimizer, 1)
    engine = grpo_rollout_engine(config, m.policy, m.tokenizer, m.engine)
    assert engine is not m.engine and engine.model is m.policy and engine.quantization == "int8"
    sync_engine(engine, m.policy)
    merged = create_engine("torch", merged_copy(m.policy), dtype=torch.float32,
                           quantization="int8")
    for params in PARAMS.values():
        ours, theirs = engine.generate(PROMPTS, params), merged.generate(PROMPTS, params)
        assert torch.equal(ours.completion_ids, theirs.completion_ids)
        torch.testing.assert_close(ours.logprobs, theirs.logprobs, rtol=0, atol=1e-6)
