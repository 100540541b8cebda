# Two entry points for a fresh clone (only Python 3.10+ needed):
#   make demo   set up .venv, build the bundled demo model's index, print substitutes
#   make test   set up .venv with the test, dask and plot extras, run the test suite
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_MODEL := models/demo-kn4-20k.arpa.gz
DEMO_INDEX := demo-kn4-20k.fsidx
# Budget for the slow tests (big model, kill loops, long fuzzing) that CI also runs.
SLOW_TIMEOUT ?= 3000

.PHONY: demo test test-slow

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dask,plot]'
	touch $@

demo: $(BIN)/.installed
	$(BIN)/fastsubs-index build $(DEMO_MODEL) -o $(DEMO_INDEX) --force
	$(BIN)/fastsubs-query $(DEMO_INDEX) -n 5 -i examples/sentences.txt

test: $(BIN)/.installed
	$(BIN)/python -m pytest

test-slow: $(BIN)/.installed
	timeout $(SLOW_TIMEOUT) $(BIN)/python -m pytest -m slow
