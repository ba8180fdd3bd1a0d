# snapready developer entry points. `make` (or `make help`) lists the targets.
# Everything installs into .venv from PyPI; nothing is assumed on the machine but python3.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install serve test lint typecheck unit fuzz bench manifests clean

help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) ## create .venv and install snapready with its dev tools

serve: $(STAMP) ## run the webhook on https://127.0.0.1:8443 (local CA in certs/, example policies)
	@test -f certs/tls.key || $(BIN)/snapready certs --out certs >/dev/null
	@echo "snapready: https://127.0.0.1:8443  (try: curl --cacert certs/ca.crt -H 'Content-Type: application/json' --data @tests/data/reviews/03-pod-create-gvisor-l4x4-gpu4.json https://127.0.0.1:8443/mutate)"
	$(BIN)/snapready serve --policies manifests/examples

lint: $(STAMP) ## ruff lint and format check
	$(BIN)/ruff check webhook tests
	$(BIN)/ruff format --check webhook tests

typecheck: $(STAMP) ## mypy --strict on the package and tests
	$(BIN)/mypy

unit: $(STAMP) ## run pytest only (PYTEST_ARGS=... to pass options)
	$(BIN)/pytest -n 2 -m "not slow" $(PYTEST_ARGS)

test: lint typecheck unit ## the whole suite: lint, types, tests (what CI runs)

fuzz: $(STAMP) ## longer hypothesis fuzzing of the admission edge
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -n 2 -m "slow or fuzz" -p no:randomly tests

bench: $(STAMP) ## throughput/latency benchmark against a constant-response server
	$(BIN)/python scripts/bench.py

manifests: $(STAMP) ## regenerate manifests/install.yaml from the chart
	$(BIN)/python scripts/render_manifests.py

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
