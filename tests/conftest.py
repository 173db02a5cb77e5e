"""Suite-wide set-up for pytest-xdist (`make test` runs one worker per core).

- Each worker gets one intra-op thread: two workers with a thread pool each would
  oversubscribe the cores, which slows torch several-fold. Child processes (CLI runs,
  sandboxes) inherit the limit.
- Tests are distributed by file (`--dist loadfile`), so module fixtures are built once. The
  sandbox tests' leftover check tells their own sandbox processes from another worker's
  (tests/sandbox/sandbox_test_helpers.py).
- A wide terminal for rich, so that messages are not wrapped at paths whose length depends on
  the worker's temp directory.
- The Hugging Face hub offline: no test downloads anything, and on a machine without network a
  model name the hub is asked about (a test's deliberately missing model) costs ~50 s of
  connection retries before the error the test expects.
"""

import os

os.environ.setdefault("COLUMNS", "200")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    try:
        import torch
    except ImportError:
        pass
    else:
        torch.set_num_threads(1)
