"""rlvr: reinforcement learning from verifiable rewards (RLVR) with GRPO.

The reward pipeline (``rlvr.rewards``) is usable without torch.
"""

__version__ = "0.1.0"
