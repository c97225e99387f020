# The README's two commands: `make demo` and `make test`; `make lint` checks style and types (CI runs it first).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint install install-test install-lint bench clean

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

test: install-test
	$(BIN)/python -m pytest tests

# The same packages as `make test`, so that mypy sees the same installed types everywhere.
lint: install-lint
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

bench: install
	$(BIN)/python benchmarks/central_speed.py --quick

clean:
	rm -rf $(VENV) demo-output build dist src/*.egg-info .mypy_cache .ruff_cache
