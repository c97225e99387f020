# The README's two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test install install-test bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[all]"

install-test: $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ".[test,all]"

demo: install
	$(BIN)/dprange demo --output demo-output

test: install-test
	$(BIN)/python -m pytest tests

bench: install
	$(BIN)/python benchmarks/central_speed.py --quick

clean:
	rm -rf $(VENV) demo-output build dist src/*.egg-info
