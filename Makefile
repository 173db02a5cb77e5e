# Fresh machine: `make demo` installs everything and runs the main job; `make test` installs
# everything and runs the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
RLVR := $(VENV)/bin/rlvr
SHARED ?= ../shared

.PHONY: setup demo verify-demo test test-slow docs wheel-check bench clean

setup: $(VENV)/.rlvr-installed

$(VENV)/.rlvr-installed: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh $(VENV)

demo: setup
	$(RLVR) train

verify-demo: setup
	$(PY) scripts/gsm8k_self_check.py $(SHARED)/data/gsm8k/test.jsonl runs/demo/gsm8k_refs.jsonl
	$(RLVR) verify runs/demo/gsm8k_refs.jsonl -o runs/demo/verified.jsonl --workers 2 \
		--summary --summary-json runs/demo/summary.json

# One pytest-xdist worker per core (tests/conftest.py gives each one torch thread and groups
# the tests by file, the sandboxed-program files together, for --dist loadfile).
TEST_WORKERS ?= auto

test: setup
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile
	$(MAKE) docs

# The documentation site (mkdocs.yml, docs/) into site/; --strict fails on a broken link, a
# missing page or a page left out of the navigation.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

# A wheel and an sdist, the wheel installed into a fresh virtual environment and run there.
wheel-check: setup
	bash scripts/wheel_check.sh $(PY)

test-slow: setup
	$(PY) -m pytest -q -m slow

bench: setup
	$(PY) benchmarks/verify_throughput.py --quick
	$(PY) benchmarks/sandbox_throughput.py --quick
	$(PY) benchmarks/rollout_throughput.py --quick
	$(PY) benchmarks/grpo_step.py --quick
	$(PY) benchmarks/grpo_memory.py --quick
	$(PY) benchmarks/update_prefix.py --quick
	$(PY) benchmarks/shared_prefill.py --quick
	$(PY) benchmarks/sft_step.py --quick
	$(PY) benchmarks/async_pipeline.py --quick
	$(PY) benchmarks/scaling.py --quick

clean:
	rm -rf $(VENV) runs .pytest_cache site
