#!/usr/bin/env bash
# The wheel works outside the checkout: build the wheel and sdist, install the wheel with its
# dependencies (from the package index) into a fresh virtual environment, and run
# `rlvr --help`, `rlvr --version` and `rlvr verify` there, from a directory with no configs/.
# The package data rlvr needs must be inside the wheel: the native kernels' C sources, the
# update's C++ allocator and the preset configs (rlvr/presets/, the default of `rlvr train`).
#
#   bash scripts/wheel_check.sh [PYTHON]     # PYTHON: one with `build` installed (.venv/bin/python)
#
# WHEEL_CHECK_SYSTEM_SITE=1 gives the fresh environment the system site-packages (offline use:
# the dependencies then come from there, the wheel itself is still what is tested).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${1:-.venv/bin/python}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

"$PYTHON" -m build --outdir "$WORK/dist" . > "$WORK/build.log" 2>&1 \
  || { tail -30 "$WORK/build.log"; echo "wheel_check: python -m build failed" >&2; exit 1; }
WHEEL="$(ls "$WORK"/dist/rlvr-*.whl)"
ls "$WORK"/dist/rlvr-*.tar.gz > /dev/null
echo "wheel_check: built $(basename "$WHEEL") and $(basename "$(ls "$WORK"/dist/rlvr-*.tar.gz)")"

# What the wheel must carry.
"$PYTHON" - "$WHEEL" <<'PY'
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
need = ["rlvr/presets/arithmetic.yaml", "rlvr/presets/smoke.yaml", "rlvr/cli/__init__.py",
        "rlvr/kernels/block_cache.cpp"]
need += [n for n in names if n.startswith("rlvr/kernels/") and n.endswith(".c")][:1]
missing = [n for n in need if n not in names]
kernels = [n for n in names if n.startswith("rlvr/kernels/") and n.endswith(".c")]
if missing or not kernels:
    sys.exit(f"wheel_check: missing from the wheel: {missing or 'the kernels C sources'}")
print(f"wheel_check: the wheel carries {len(kernels)} kernel C sources and the presets")
PY

SITE=()
if [ "${WHEEL_CHECK_SYSTEM_SITE:-0}" = 1 ]; then SITE=(--system-site-packages); fi
"$PYTHON" -m venv "${SITE[@]}" "$WORK/venv"
"$WORK/venv/bin/python" -m pip install --quiet "$WHEEL" > "$WORK/install.log" 2>&1 \
  || { tail -30 "$WORK/install.log"; echo "wheel_check: pip install failed" >&2; exit 1; }

cd "$WORK"   # no checkout here: nothing but the wheel
RLVR="$WORK/venv/bin/rlvr"
"$RLVR" --help > help.txt
grep -q "verify" help.txt && grep -q "train" help.txt
EXPECTED="$(sed -n 's/^version = "\(.*\)"$/\1/p' "$OLDPWD/pyproject.toml")"
GOT="$("$RLVR" --version)"
[ "$GOT" = "$EXPECTED" ] || { echo "wheel_check: rlvr --version says $GOT, pyproject $EXPECTED" >&2; exit 1; }
printf '%s\n' \
  '{"id": "a", "task_type": "math", "completion": "48 / 2 = 24\n#### 72", "reference": "72"}' \
  '{"id": "b", "task_type": "math", "completion": "#### 71", "reference": "72"}' > small.jsonl
"$RLVR" verify small.jsonl -o scored.jsonl
"$WORK/venv/bin/python" - <<'PY'
import json
rows = [json.loads(line) for line in open("scored.jsonl")]
assert [(r["id"], r["status"]) for r in rows] == [("a", "correct"), ("b", "wrong")], rows
from rlvr.cli.common import default_preset
preset = default_preset()
assert preset is not None and preset.parent.name == "presets", preset
print(f"wheel_check: rlvr verify scored {len(rows)} rows; default preset {preset}")
PY
echo "wheel_check: ok (rlvr $GOT)"
