# One venv per checkout; every target installs what it needs first.
# TORCH picks the torch build the venv gets when it has none. On our machines
# torch==2.13.0 is a CPU build from local disk; override it to match yours,
# e.g. `make test TORCH=torch` or a CUDA/CPU wheel of your choice.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch==2.13.0
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.hookscope-installed
TESTS  := $(VENV)/.hookscope-test-installed

.PHONY: install demo test check bench clean mypy-path

# core/fast/_onepass.c: the install compiles it, so an edit to it reinstalls.
# torch comes first, with pip (which finds a local CPU build where one is offered); the
# rest with uv, which resolves and installs the test extra in ~30 s where pip took ~140 s
# on a clean venv here, and keeps the torch already installed. Without uv, pip does it all.
$(STAMP): pyproject.toml core/fast/_onepass.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)" || $(PY) -m pip install -q torch
	$(PY) -m uv --version >/dev/null 2>&1 || $(PY) -m pip install -q uv || true
	$(PY) -m uv pip install -q --python $(PY) -e . || $(PY) -m pip install -q -e .
	touch $(STAMP)

# The test extra (pytest-qt, hypothesis, mypy, transformers, accelerate, ray) only for `make test`.
$(TESTS): $(STAMP)
	$(PY) -m uv pip install -q --python $(PY) -e ".[test]" || $(PY) -m pip install -q -e ".[test]"
	touch $(TESTS)

install: $(STAMP)

# On Linux with a display, first check Qt's xcb system libraries (prints the apt line if any is missing).
demo: $(STAMP)
	@$(PY) -m hookscope.app.system_check
	$(VENV)/bin/hookscope

# The import contracts (pyproject's [tool.importlinter]) first (a second), then
# the whole suite, headless, on every CPU (pytest-xdist; the Ray tests share one
# worker, see tests/conftest.py) with the type check beside it: mypy takes ~45 s of
# one core on a clean clone, and the suite leaves about a quarter of two cores idle
# (its subprocesses and waits), so it costs the run almost nothing there; its
# report follows the suite's. Then tests/core again on the reference path alone
# (HOOKSCOPE_FAST=0: core/fast's speed-ups off; the Ray tests, which run the same
# engine in an actor, once). `make check` is the contracts and the types alone.
# A worker that crashes (or that a hung test's timeout ends) is not replaced: under
# --dist loadgroup, xdist 3.8's replacement can leave the run waiting forever for work it
# re-queued empty (pytest-xdist#1378); the run stops there and names the test instead.
XDIST := -n auto --dist loadgroup --max-worker-restart=0

test: $(TESTS) mypy-path
	$(VENV)/bin/lint-imports
	@$(PY) -m mypy > $(VENV)/mypy-report.txt 2>&1 & types=$$!; \
	$(PY) -m pytest $(XDIST); suite=$$?; \
	wait $$types; typed=$$?; echo "$(PY) -m mypy"; cat $(VENV)/mypy-report.txt; \
	test $$suite -eq 0 && test $$typed -eq 0
	HOOKSCOPE_FAST=0 $(PY) -m pytest $(XDIST) -q -m "not ray" tests/core

check: $(TESTS) mypy-path
	$(VENV)/bin/lint-imports
	$(PY) -m mypy

# mypy reads the package as users import it (hookscope.core, ...): pyproject's mypy_path
# points at .mypy-path/, whose hookscope/{core,widgets,app} are symlinks to the folders.
mypy-path:
	@mkdir -p .mypy-path/hookscope
	@for p in core widgets app; do ln -sfn ../../$$p .mypy-path/hookscope/$$p; done

bench: $(STAMP)
	$(PY) -m bench

clean:
	rm -rf $(VENV) build *.egg-info .mypy-path
