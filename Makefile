# Entry points for a fresh clone (only Python 3.10+ needed):
#   make demo       set up .venv (fastsubs alone), build the bundled demo model's index, print substitutes
#   make test       add the test, dask, plot and lint extras to .venv, run the default test suite
#   make test-slow  the slow tests (big model, kill loops, long fuzzing), within SLOW_TIMEOUT seconds
#   make lint       ruff on the package and the tests, mypy on the package (rules in pyproject.toml)
# The C core is compiled in place (fastsubs/_kernel*.so) and recompiled whenever a source
# under kernel/ changes, so the tests always run the core as it is in the tree.
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

KERNEL_SOURCES := $(wildcard kernel/*.c kernel/*.h kernel/lmdb/*.c kernel/lmdb/*.h)
PACKAGE := fastsubs indexer query bench

.PHONY: demo test test-slow lint

# fastsubs and what it needs to run, nothing more (the demo).  Its modules are byte-compiled
# here, as pip does for a regular install: an editable one leaves it to each import, which
# does not save the result where PYTHONDONTWRITEBYTECODE is set (~20 ms of every start-up).
$(BIN)/.base: pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	$(BIN)/python -m compileall -q fastsubs indexer query
	touch $@

# ... and the extras of development: tests, Dask, plots, lint.
$(BIN)/.installed: $(BIN)/.base
	$(BIN)/pip install --quiet -e '.[test,dask,plot,lint]'
	touch $@

# The editable install compiles the core once; this recompiles it after an edit.
$(BIN)/.kernel-built: $(KERNEL_SOURCES) $(BIN)/.base
	$(BIN)/python setup.py --quiet build_ext --inplace
	touch $@

demo: $(BIN)/.kernel-built
	$(BIN)/fastsubs-index build $(DEMO_MODEL) -o $(DEMO_INDEX) --force
	$(BIN)/fastsubs-query $(DEMO_INDEX) -n 5 -i examples/sentences.txt

test: $(BIN)/.installed $(BIN)/.kernel-built
	$(BIN)/python -m pytest -n $(TEST_WORKERS)

test-slow: $(BIN)/.installed $(BIN)/.kernel-built
	timeout $(SLOW_TIMEOUT) $(BIN)/python -m pytest -m slow

lint: $(BIN)/.installed
	$(BIN)/ruff check $(PACKAGE) tests
	$(BIN)/mypy $(PACKAGE)
