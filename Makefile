# The two commands in README.md: `make demo` and `make test`. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo chaos test unit unit-pure-python integration container-test image lint typecheck docs clean

# setup.py and the C source too: an editable install builds static_consumer/_base/records/native.c once, in place.
# Both distributions of this repository in one pip command, so the lab (static-consumer-lab: the harness,
# the pytest plugin, the demo) comes from ./lab and not from a package index.
$(STAMP): pyproject.toml setup.py static_consumer/_base/records/native.c lab/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ./lab -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/static-consumer demo

# The long chaos run (docs/chaos.md): e.g. make chaos CHAOS_ARGS="--seed 7 --minutes 12 --protocol consumer".
chaos: $(STAMP)
	$(BIN)/python bench/chaos.py $(CHAOS_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check static_consumer assignors lab tests integration bench

typecheck: $(STAMP)
	$(BIN)/mypy

# Unit and integration tests in one run against a real Apache Kafka broker. The editable installs' modules
# are compiled to bytecode first, as a wheel install has them: with PYTHONDONTWRITEBYTECODE=1 (CI images,
# this machine) every child process the tests start would otherwise compile them again. pytest's exit code 5
# ("no tests collected") is a failure here: a suite that runs nothing proves nothing.
test: lint typecheck
	@mkdir -p out
	$(BIN)/python -m compileall -q static_consumer assignors lab/static_consumer_lab
	$(BIN)/pytest tests integration -p no:cacheprovider --durations=25 --junitxml=out/junit.xml; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5): failing"; exit 1; fi; exit $$rc
	$(MAKE) unit-pure-python

# The unit tests that touch records once more on the pure-Python Record (what runs where the C extension
# was not built); tests/unit/test_record_impls.py checks both implementations in every run anyway.
PURE_PYTHON_TESTS := tests/unit/test_adapter_messages.py tests/unit/test_record_api.py tests/unit/test_record_batch.py \
  tests/unit/test_consumer_unit.py tests/unit/test_stall_guard.py tests/unit/test_batch_committer.py \
  tests/unit/test_spark_schema.py tests/unit/test_aio_consumer.py
unit-pure-python: $(STAMP)
	STATIC_CONSUMER_PURE_PYTHON=1 $(BIN)/pytest $(PURE_PYTHON_TESTS) -p no:cacheprovider -q

unit: $(STAMP)
	$(BIN)/pytest tests

integration: $(STAMP)
	$(BIN)/pytest integration

# The Kafka image of the container backend (docs/testing.md): built once per Kafka version and recipe.
image: $(STAMP)
	$(BIN)/python -m static_consumer_lab.brokers.kafka_image build

# The integration tests' [container] variants only, on that image (needs a Docker engine and compose).
container-test: $(STAMP)
	@mkdir -p out
	$(BIN)/pytest integration -k container -p no:cacheprovider --junitxml=out/junit-container.xml

docs: $(STAMP)
	$(BIN)/python -m static_consumer.settings._docgen > docs/configuration.md

clean:
	rm -rf $(VENV) out .mypy_cache .ruff_cache .pytest_cache
