"""GRPO training: run config, SFT cold start, the GRPO loop and its hooks, checkpoints, resume.

A regular package (it was an implicit namespace package) so that the import contracts in
``pyproject.toml`` (``[tool.importlinter]``) see its modules. Nothing is imported here:
``import rlvr.train`` stays cheap.
"""
