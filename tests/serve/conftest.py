"""Fixtures: the real `rlvr serve` app over the tiny random model, run by uvicorn in a thread on
a free loopback port."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")
pytest.importorskip("transformers")

import torch
from serve_helpers import running
from transformers import GPT2Config, GPT2LMHeadModel

from rlvr.models import load_model_and_tokenizer
from rlvr.serve import ModelServer


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of ``tiny-random``."""
    return load_model_and_tokenizer("tiny-random")


@pytest.fixture(scope="session")
def served(tiny):
    """``(base_url, ModelServer)`` of a live server over the tiny model."""
    model, tokenizer = tiny
    server = ModelServer(model, tokenizer, "tiny-random", max_concurrency=8)
    with running(server) as url:
        yield url, server


@pytest.fixture(scope="session")
def tiny_gpt2(tiny):
    """A 1-layer random GPT-2 over the tiny tokenizer (64 positions): an architecture the
    torch engine refuses, so ``rlvr serve`` runs it through the hf engine."""
    _, tokenizer = tiny
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=32,
                                      n_layer=1, n_head=2, eos_token_id=tokenizer.eos_token_id,
                                      pad_token_id=tokenizer.pad_token_id))
