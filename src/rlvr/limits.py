"""Upper bounds of rlvr's settings: the config fields (``le=`` of their pydantic ``Field``) and
the matching command-line options.

A setting past its bound is refused before any work starts (exit 2, naming the field and the
bound) instead of spawning a million processes, allocating a billion-token cache or
overflowing a seed. Each bound is far above what any run on one machine uses; raise one here if
a real run needs more.

Every number here is a plain ``int`` / ``float`` so that the generated config reference
(docs/config.md) can print it.
"""

from __future__ import annotations

#: A seed: what ``random.seed``, ``torch.manual_seed`` and numpy's ``RandomState`` all accept
#: (numpy's legacy seeding takes 0 .. 2**32 - 1).
MAX_SEED = 2**32 - 1

#: Processes, threads or actors one setting may start (verifier workers, update processes,
#: Ray actors, tool workers, torch threads).
MAX_WORKERS = 1024

#: Tokens of one sequence (completion caps, SFT length, overlong buffers, episode budgets).
MAX_TOKENS = 131_072

#: Tokens of one micro-batch (``grpo.micro_batch_tokens``).
MAX_BATCH_TOKENS = 2**24

#: Rows of a data set (training / validation problems, SFT examples, sample counts).
MAX_ROWS = 10_000_000

#: Steps, and intervals counted in steps (validation, checkpoints, warm-up, windows).
MAX_STEPS = 1_000_000

#: Prompts or completions in one batch.
MAX_BATCH = 65_536

#: Completions of one prompt (``grpo.group_size``, pass@k samples).
MAX_GROUP = 1024

#: Repetitions of a loop that runs within a step (epochs, updates per batch, sampling rounds,
#: turns, tool calls per turn, rollbacks).
MAX_REPEATS = 1000

#: Seconds of one call's time bound (verifier, tool): one day.
MAX_TIMEOUT_S = 86_400.0

#: A learning rate.
MAX_LR = 1e4  # far past any useful value; a deliberately exploding run (1e3) still starts

#: A sampling temperature.
MAX_TEMPERATURE = 100.0

#: Coefficients, weights, scales, factors and thresholds without a natural bound.
MAX_COEF = 1e6

#: Bytes of one tool observation.
MAX_BYTES = 2**26

#: Bytes of one input line, characters of one prompt (``data.max_line_bytes``,
#: ``data.max_prompt_chars``): 1 GiB.
MAX_INPUT_BYTES = 2**30

#: A LoRA rank.
MAX_LORA_RANK = 4096
