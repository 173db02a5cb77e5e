"""``python -m rlvr.cli``: the ``rlvr`` command."""

from rlvr.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
