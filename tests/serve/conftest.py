"""Fixtures: the real `rlvr serve` app over the tiny random model, run by uvicorn in a thread on
a free loopback port."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")
pytest.importorskip("transformers")

from rlvr.models import load_model_and_tokenizer  # noqa: E402
from rlvr.serve import ModelServer  # noqa: E402

from serve_helpers import running  # noqa: E402


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
