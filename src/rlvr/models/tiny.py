"""A tiny randomly initialised causal LM with a character-level tokenizer, built locally.

For tests and the ``smoke`` preset: no download, builds in well under a second, and its
tokenizer has a chat template like a real instruct model's.
"""

from __future__ import annotations

import string

SPECIAL_TOKENS = ["<pad>", "<|im_start|>", "<|im_end|>", "<unk>"]
CHARS = list(string.digits + string.ascii_letters + string.punctuation + " \n")
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_tokenizer():
    """A character-level ``PreTrainedTokenizerFast``: one token per character of
    digits, ASCII letters, punctuation, space and newline, plus ``<pad>``, ``<|im_start|>``,
    ``<|im_end|>`` (the end-of-sequence token) and ``<unk>``. Vocabulary size 100."""
    # optional dependency: tokenizers, transformers (extra `train`)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARS)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token="<pad>",
        eos_token="<|im_end|>",
        bos_token="<|im_start|>",
        unk_token="<unk>",
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def tiny_model(tokenizer, seed: int = 0, hidden_size: int = 64, layers: int = 2):
    """A randomly initialised Llama-architecture causal LM sized for ``tokenizer``.

    Args:
        tokenizer: supplies vocabulary size and special token ids.
        seed: torch seed for the initial weights (same seed, same weights).
        hidden_size: model width (4 heads, 2 key/value heads: grouped-query attention like the
            default model).
        layers: number of decoder layers.
    """
    import torch  # optional dependency: torch (extra `train`)
    from transformers import LlamaConfig, LlamaForCausalLM  # optional dependency: transformers

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=tokenizer.bos_token_id,
        tie_word_embeddings=True,
    )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(config)
    finally:
        torch.random.set_rng_state(generator_state)
    return model


def spread_weights(model, std: float = 0.25, seed: int = 1):
    """Redraw every weight matrix of ``model`` from N(0, std^2), in place; returns ``model``.

    The stock initialisation (std 0.02) gives a tiny random model near-uniform logits, so its
    greedy output is one repeated token and its samples are noise; wider weights give peaked,
    varied distributions, which engine and sampling tests need. Vectors (norms, biases) are
    left as they are. Deterministic: same ``seed``, same weights.
    """
    import torch  # optional dependency: torch (extra `train`)

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=generator) * std)
    return model
