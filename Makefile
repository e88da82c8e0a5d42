# rumourmill: two commands after cloning, `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit kafka clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## make run: embedded Tansu broker + worker + web server, publishes the demo story, serves until Ctrl-C
run: $(STAMP)
	$(BIN)/rumourmill dev

## make test: lint, types, then the whole suite on a real Apache Kafka broker the suite starts and stops
test: $(STAMP) lint typecheck kafka
	$(BIN)/python -m pytest; status=$$?; [ $$status -eq 5 ] && exit 0; exit $$status

lint: $(STAMP)
	$(BIN)/ruff check schemas projections streams tests
	$(BIN)/ruff format --check schemas projections streams tests

typecheck: $(STAMP)
	$(BIN)/mypy schemas projections streams

## fetch the Apache Kafka jars into the cache (~/.cache/rumourmill) once
kafka: $(STAMP)
	$(BIN)/rumourmill broker fetch

unit: $(STAMP)
	$(BIN)/python -m pytest -m "not integration"

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
