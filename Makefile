# Entry points for a fresh clone (only Python 3.10+ needed):
#   make demo       set up .venv (fastsubs alone), build the bundled demo model's index, print substitutes
#   make test       add the test, dask, parquet, dataframe, plot and lint extras to .venv, run the default test suite
#   make test-slow  the slow tests (big model, kill loops, long fuzzing, Spark), within SLOW_TIMEOUT seconds
#   make lint       ruff on the package's folders and the tests, mypy on the package (rules in pyproject.toml)
#   make check-lmdb the vendored LMDB is its upstream base plus the patches kernel/lmdb/UPSTREAM names
#   make check-package   build the sdist and wheels, install them into fresh environments
#                   outside the tree and run the tools there (needs PyPI for the dependencies)
#   make test-pythons    the default suite on the other Pythons the project supports (3.10, 3.13),
#                   each in a .venv-X.Y of its own
# The C core is compiled in place (fastsubs/_kernel*.so, indexer/_native*.so) and recompiled whenever a source
# under kernel/ (or indexer/native.c) changes, so the tests always run the core as it is in the tree.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_MODEL := models/demo-kn4-20k.arpa.gz
DEMO_INDEX := demo-kn4-20k.fsidx
# Budget for the slow tests (big model, kill loops, long fuzzing) that CI also runs.
SLOW_TIMEOUT ?= 3000
# Processes the default suite runs in (pytest-xdist): the machines this runs on have 2 cores.
# The slow suite runs in one: its kill loops and timings want the CPU to themselves.
TEST_WORKERS ?= 2
# The other Pythons of test-pythons (pyenv's, where this project's machines have them).
PYENV_VERSIONS ?= $(shell pyenv root 2>/dev/null || echo $(HOME)/.pyenv)/versions
PYTHON_3_10 ?= $(PYENV_VERSIONS)/3.10.13/bin/python3
PYTHON_3_13 ?= $(PYENV_VERSIONS)/3.13.0/bin/python3

# What compiling the kernel in place (setup.py below) needs in the venv itself: pyproject.toml's
# [build-system] requires (pip's isolated builds get it from there; a venv of Python 3.12+ has
# no setuptools at all, older ones one too old for the SPDX licence).
BUILD_REQUIRES := 'setuptools>=77'

# What the core is compiled from (kernel/SOURCES names the sources; the headers come along):
# a change to any of them recompiles it.
KERNEL_SOURCES := kernel/SOURCES $(wildcard kernel/*.c kernel/*.h kernel/lmdb/*.c kernel/lmdb/*.h kernel/ryu/*.c kernel/ryu/*.h) indexer/native.c
# The package's folders: fastsubs/, and those pyproject.toml's package-dir installs into it.
PACKAGE := fastsubs indexer query bench

.PHONY: demo test test-slow lint check-lmdb check-package test-pythons

# fastsubs and what it needs to run, nothing more (the demo).  Its modules are byte-compiled
# here, as pip does for a regular install: an editable one leaves it to each import, which
# does not save the result where PYTHONDONTWRITEBYTECODE is set (a cost at every start-up:
# docs/performance.md, "Tuning").
$(BIN)/.base: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip $(BUILD_REQUIRES)
	$(BIN)/pip install --quiet -e .
	$(BIN)/python -m compileall -q fastsubs indexer query
	touch $@

# ... and the extras of development: tests, Dask, Parquet, plots, lint.
$(BIN)/.installed: $(BIN)/.base
	$(BIN)/pip install --quiet -e '.[test,dask,parquet,dataframe,plot,lint]'
	touch $@

# The editable install compiles the core once; this recompiles it after an edit.
$(BIN)/.kernel-built: $(KERNEL_SOURCES) $(BIN)/.base
	$(BIN)/python setup.py --quiet build_ext --inplace
	touch $@

demo: $(BIN)/.kernel-built
	$(BIN)/fastsubs-index build $(DEMO_MODEL) -o $(DEMO_INDEX) --force
	$(BIN)/fastsubs-query $(DEMO_INDEX) -n 5 -i examples/sentences.txt
	@echo "The tools are in $(BIN) ($(BIN)/fastsubs-query $(DEMO_INDEX) -n 10 < your-sentences.txt), or in your PATH after: source $(BIN)/activate" >&2

# PYTHONDONTWRITEBYTECODE cleared for the suite: where it is set, pytest cannot keep the test
# modules it rewrites (for its assertions) in tests/__pycache__, and each worker rewrote every
# one of them at every run (~1.5 s of CPU).
test: $(BIN)/.installed $(BIN)/.kernel-built
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS)

# ... and Spark's Python API for the slow test that Spark reads a dataset (~350 MB: not in make test).
$(BIN)/.spark: $(BIN)/.installed
	$(BIN)/pip install --quiet -e '.[spark]'
	touch $@

test-slow: $(BIN)/.installed $(BIN)/.spark $(BIN)/.kernel-built
	timeout $(SLOW_TIMEOUT) $(BIN)/python -m pytest -m slow

# (offline: the base is known by its git blob ids; docs/development.md, "Updating the vendored LMDB")
check-lmdb: $(BIN)/.installed
	$(BIN)/python -m pytest tests/test_vendored_lmdb.py -n 0

check-package: $(BIN)/.installed $(BIN)/.kernel-built
	$(BIN)/python -m pytest -m packaging

# Each Python compiles its own core in place (fastsubs/_kernel.cpython-3XY-*.so: they coexist).
test-pythons:
	$(MAKE) test VENV=.venv-3.10 PYTHON=$(PYTHON_3_10)
	$(MAKE) test VENV=.venv-3.13 PYTHON=$(PYTHON_3_13)

# mypy sees each module under its installed name (indexer/build.py as fastsubs.indexer.build:
# pyproject.toml's package-dir), through tests/typecheck.py.
lint: $(BIN)/.installed
	$(BIN)/ruff check $(PACKAGE) tests
	$(BIN)/python tests/typecheck.py
