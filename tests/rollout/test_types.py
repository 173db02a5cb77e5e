import pytest
import torch

from rlvr.rollout import RolloutOutput, SamplingParams, SamplingParamsError
from rlvr.rollout.engine import build_output, first_stop_lengths, left_pad
from rlvr.rollout.types import RolloutTiming


@pytest.mark.parametrize("kwargs, field", [
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -1}, "top_k"),
    ({"top_k": 2.5}, "top_k"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"n": 0}, "n"),
    ({"seed": "x"}, "seed"),
    ({"stop_token_ids": [1, -2]}, "stop_token_ids"),
    ({"stop_token_ids": "ab"}, "stop_token_ids"),
])
def test_sampling_params_errors_name_the_field(kwargs, field):
    with pytest.raises(SamplingParamsError, match=rf"SamplingParams\.{field}\b"):
        SamplingParams(**kwargs)


def test_sampling_params_normalises_stop_ids_and_greedy():
    p = SamplingParams(temperature=0, stop_token_ids=[5, 2, 5])
    assert p.stop_token_ids == (2, 5)
    assert p.greedy
    assert SamplingParams(stop_token_ids=7).stop_token_ids == (7,)
    assert SamplingParams(seed=3).resolved_seed() == 3
    torch.manual_seed(0)
    a = SamplingParams().resolved_seed()
    torch.manual_seed(0)
    assert SamplingParams().resolved_seed() == a


def test_left_pad_and_stop_lengths():
    ids, mask = left_pad([[1, 2, 3], [4]], pad_token_id=0)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]]
    assert mask.tolist() == [[True, True, True], [False, False, True]]
    tokens = torch.tensor([[5, 9, 7, 9], [5, 5, 5, 5]])
    lengths, stopped = first_stop_lengths(tokens, [9])
    assert lengths.tolist() == [2, 4] and stopped.tolist() == [True, False]


def test_build_output_masks_pads_and_indexes_prompts():
    tokens = torch.tensor([[3, 2, 8], [4, 4, 4], [1, 2, 0], [6, 6, 6]])
    logprobs = -torch.ones(4, 3)
    out = build_output(tokens, logprobs, torch.tensor([2, 3, 2, 1]),
                       torch.tensor([True, False, True, False]), n=2, pad_token_id=0,
                       timing=RolloutTiming())
    assert out.completion_ids.tolist() == [[3, 2, 0], [4, 4, 4], [1, 2, 0], [6, 0, 0]]
    assert out.completion_mask.sum(1).tolist() == [2, 3, 2, 1]
    assert out.logprobs[3].tolist() == [-1.0, 0.0, 0.0]
    assert out.prompt_index.tolist() == [0, 0, 1, 1]
    assert out.finish_reason == ["stop", "length", "stop", "length"]
    assert out.timing.tokens_generated == 8
    assert out.completion(0) == [3, 2]


def test_rollout_output_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="logprobs"):
        RolloutOutput(torch.zeros(2, 3, dtype=torch.long), torch.ones(2, 3, dtype=torch.bool),
                      torch.zeros(2, 2), torch.zeros(2, dtype=torch.long), ["stop"] * 2,
                      torch.zeros(2, dtype=torch.long))


def test_rollout_output_loss_mask_defaults_to_the_completion_mask_and_lies_within_it():
    ids = torch.tensor([[5, 6, 7], [8, 0, 0]])
    mask = torch.tensor([[True, True, True], [True, False, False]])
    zeros = torch.zeros(2, 3)
    out = RolloutOutput(ids, mask, zeros, torch.tensor([0, 0]), ["stop", "length"],
                        torch.tensor([3, 1]))
    assert out.loss_mask.tolist() == mask.tolist()
    sampled = torch.tensor([[True, False, True], [True, False, False]])
    out = RolloutOutput(ids, mask, zeros, torch.tensor([0, 0]), ["stop", "length"],
                        torch.tensor([3, 1]), loss_mask=sampled)
    assert out.loss_mask.tolist() == sampled.tolist()
    with pytest.raises(ValueError, match="loss_mask is True outside completion_mask"):
        RolloutOutput(ids, mask, zeros, torch.tensor([0, 0]), ["stop", "length"],
                      torch.tensor([3, 1]), loss_mask=torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="loss_mask has shape"):
        RolloutOutput(ids, mask, zeros, torch.tensor([0, 0]), ["stop", "length"],
                      torch.tensor([3, 1]), loss_mask=torch.ones(2, 2, dtype=torch.bool))
