"""Fixtures shared by the rollout-worker tests."""

import pytest

from rlvr.models import load_model_and_tokenizer
from rlvr.models.tiny import spread_weights


@pytest.fixture(scope="module")
def tiny():
    """The tiny model with weights scaled up (as tests/rollout) so samples are not degenerate;
    ``(model, tokenizer)``."""
    model, tokenizer = load_model_and_tokenizer("tiny-random")
    return spread_weights(model).eval(), tokenizer
