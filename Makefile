# The README's two commands: `make demo` and `make test`; `make lint` checks style and types (CI runs it first);
# `make test` leaves out the tests marked slow, which `make test-slow` runs (CI runs both), each in parallel;
# `make docs` builds the docs site into site/ (mkdocs.yml), failing on any warning.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-slow lint docs install install-test install-lint install-docs bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[all]"

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,all]"

demo: install
	$(BIN)/dprange demo --output demo-output

install-lint: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,all,lint]"

# One worker per core (pytest-xdist); a file's tests stay on one worker, so its module fixtures start once.
PYTEST_PARALLEL := -n auto --dist loadfile

test: install-test
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) -m "not slow" tests

test-slow: install-test
	$(BIN)/python -m pytest $(PYTEST_PARALLEL) -m slow tests

# The same packages as `make test`, so that mypy sees the same installed types everywhere.
lint: install-lint
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

install-docs: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[all,docs]"

# The mechanism table is generated from the registry first (tests/test_docs.py checks it is current).
docs: install-docs
	$(BIN)/python -m dprange.registry --docs > docs/mechanisms.md
	$(BIN)/mkdocs build --strict --quiet

bench: install
	$(BIN)/python benchmarks/central_speed.py --quick

clean:
	rm -rf $(VENV) demo-output build dist site src/*.egg-info .mypy_cache .ruff_cache
