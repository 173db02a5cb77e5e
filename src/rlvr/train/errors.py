"""Errors of a training run."""


class RunInputError(ValueError):
    """The run cannot start: bad data or a model that does not load (the CLI exits 2)."""
