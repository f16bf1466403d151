# Canvas Run Service: the commands a developer and CI run (.ci/run is `make test`).
#   make run     the embedded stack (moto stands in for DynamoDB, S3 and Step Functions)
#   make test    lint, every test tier, then the infrastructure checks; all offline

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
# Tiers share ports and files: run targets one at a time even under `make -j`.
.NOTPARALLEL:

# The real 3.13 interpreter (not pyenv's shim): `sam build` needs the runtime's exact Python on PATH.
PYTHON ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) $(shell command -v python3.13) python3)
PYTHON_DIR := $(patsubst %/,%,$(dir $(realpath $(shell command -v $(PYTHON)))))
VENV := .venv
SAM_VENV := .venv-sam
BIN := $(VENV)/bin
SAM := $(SAM_VENV)/bin/sam
SAM_CLI_SPEC ?= aws-sam-cli>=1.140
PIP_INSTALL := python -m pip install --no-input --progress-bar off
ARGS ?=

export SAM_CLI_TELEMETRY := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help setup run test lint format test-unit test-component test-statemachine test-e2e \
	infra-check build bench clean distclean

help:
	@echo "make setup              create $(VENV) (project + dev tools) and $(SAM_VENV) (aws-sam-cli)"
	@echo "                        (make run installs only what running needs: the project and moto)"
	@echo "make run [ARGS=...]     start the embedded stack (canvas serve)"
	@echo "make test               lint, unit, component, statemachine, e2e tests, infra-check"
	@echo "make lint | format      ruff check and format check | apply ruff fixes and formatting"
	@echo "make test-<tier>        one tier: unit, component, statemachine, e2e"
	@echo "make infra-check        cfn-lint, sam validate --lint, scripts/check_asl.py"
	@echo "make build              sam build (no container)"
	@echo "make bench              python -m bench"
	@echo "make clean | distclean  remove build and cache files | and both virtual environments"

# ---- environments (stamp files: reinstall only when pyproject.toml changes) -------------------------

setup: $(VENV)/.installed $(SAM_VENV)/.installed

# What running the embedded stack needs, and no more (no test tools, no aws-sam-cli).
$(VENV)/.installed-run: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP_INSTALL) -e '.[local]'
	touch $@

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP_INSTALL) -e '.[dev]'
	touch $(VENV)/.installed-run $@

# aws-sam-cli lives apart: its pins would fight the project's own dependencies.
$(SAM_VENV)/.installed:
	test -x $(SAM_VENV)/bin/python || $(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/$(PIP_INSTALL) '$(SAM_CLI_SPEC)'
	touch $@

# ---- run --------------------------------------------------------------------------------------------

run: $(VENV)/.installed-run
	$(BIN)/canvas serve $(ARGS)

bench: $(VENV)/.installed
	$(BIN)/python -m bench $(ARGS)

# ---- checks (pytest's exit code 5, "no tests collected", fails the target like any other) ------------

test: setup
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory test-unit test-component test-statemachine test-e2e
	$(MAKE) --no-print-directory infra-check

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test-unit: setup
	$(BIN)/pytest tests/unit -q

test-component: setup
	$(BIN)/pytest tests/component -q

test-statemachine: setup
	$(BIN)/pytest tests/statemachine -q

test-e2e: setup
	$(BIN)/pytest tests/e2e -q

infra-check: setup
	$(BIN)/cfn-lint template.yaml
	$(SAM) validate --lint
	$(BIN)/python scripts/check_asl.py

# ---- build ------------------------------------------------------------------------------------------

build: setup
	PATH="$(PYTHON_DIR):$$PATH" $(SAM) build

clean:
	rm -rf .aws-sam .pytest_cache .ruff_cache build dist
	find . -path ./$(VENV) -prune -o -path ./$(SAM_VENV) -prune -o -name __pycache__ -type d -print \
		| xargs rm -rf

distclean: clean
	rm -rf $(VENV) $(SAM_VENV)
