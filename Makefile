# The two commands in README.md: `make demo` and `make test`. Each creates .venv and installs what it needs.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test unit integration lint typecheck docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/static-consumer demo

lint: $(STAMP)
	$(BIN)/ruff check static_consumer assignors tests integration bench

typecheck: $(STAMP)
	$(BIN)/mypy

# Unit and integration tests in one run against a real Apache Kafka broker. pytest's exit code 5
# ("no tests collected") is a failure here: a suite that runs nothing proves nothing.
test: lint typecheck
	@mkdir -p out
	$(BIN)/pytest tests integration -p no:cacheprovider --junitxml=out/junit.xml; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests (exit 5): failing"; exit 1; fi; exit $$rc

unit: $(STAMP)
	$(BIN)/pytest tests

integration: $(STAMP)
	$(BIN)/pytest integration

docs: $(STAMP)
	$(BIN)/python -m static_consumer._docgen > docs/configuration.md

clean:
	rm -rf $(VENV) out .mypy_cache .ruff_cache .pytest_cache
