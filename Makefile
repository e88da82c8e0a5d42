# rumourmill: two commands after cloning, `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint typecheck unit kafka clean bench

# the C parts (projections/*.c, streams/*.c) are compiled by the install: edited, they are built again
$(STAMP): pyproject.toml setup.py projections/change_records.c projections/key_packing.c \
		projections/memory_access.c streams/batch_access.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

## make run: embedded Tansu broker + worker + web server, publishes the demo story, serves until Ctrl-C
run: $(STAMP)
	$(BIN)/rumourmill dev

## make test: lint, types, then the whole suite on a real Apache Kafka broker the suite starts and stops
test: $(STAMP) lint typecheck kafka
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check setup.py schemas projections streams localbroker tests benchmarks
	$(BIN)/ruff format --check setup.py schemas projections streams localbroker tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy schemas projections streams localbroker benchmarks

## fetch the Apache Kafka jars into the cache (~/.cache/rumourmill) once
kafka: $(STAMP)
	$(BIN)/rumourmill broker fetch

## make unit: every test that starts no broker (not marked integration)
unit: $(STAMP)
	$(BIN)/python -m pytest -m "not integration"

## make bench: the benchmarks (Apache Kafka started and stopped by them); `python -m benchmarks --quick` for a short run
bench: $(STAMP) kafka
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) data build projections/*.so streams/*.so .pytest_cache .mypy_cache .ruff_cache

## make soak: the oracle, leak, fault and fuzz tests at far larger sizes (RUMOURMILL_SOAK=1)
.PHONY: soak
soak: $(STAMP) kafka
	RUMOURMILL_SOAK=1 $(BIN)/python -m pytest -p no:cacheprovider tests/properties \
		tests/projections/test_fuzz_decoder.py tests/streams/test_faults.py tests/streams/test_fuzz.py
