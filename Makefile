# replmon - every target installs what it needs (venv, npm tools, MinIO, DynamoDB Local) and
# caches it: .venv/ and node_modules/ here, servers under ~/.cache/replmon (REPLMON_CACHE).
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
export SAM_CLI_TELEMETRY := 0
export REPLMON_SRC := $(CURDIR)/src
export PATH := $(CURDIR)/$(BIN):$(PATH)
# Compiled modules are written (__pycache__, git-ignored) even where the environment says not to
# (PYTHONDONTWRITEBYTECODE, set on some machines): else each test worker compiles the package and
# pytest rewrites every test module again, every run (~3 s a worker of `make test-fast`).
export PYTHONDONTWRITEBYTECODE :=
MOUNTS_TEMPLATE := templates/mount-baselines.yaml
# The task definitions run X86_64 (RuntimePlatform); the image must be built for that platform.
RUNNER_PLATFORM := linux/amd64
RUNNER_IMAGE ?= replmon-fio:latest

help:  ## this list
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

# Two stamps: the package with its lab extra (all `make demo` runs), then the build and lint tools.
# Both install from requirements.lock (pinned: a fresh machine gets CI's versions; `make lock`).
PIP := $(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock
$(BIN)/.installed-lab: pyproject.toml requirements.lock
	@command -v python3 >/dev/null || { echo "python3 (>= 3.11) is required"; exit 1; }
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PIP) -e ".[lab]"
	touch $@

$(BIN)/.installed: $(BIN)/.installed-lab requirements-dev.txt
	$(PIP) -e ".[lab]" -r requirements-dev.txt
	touch $@

lock: $(BIN)/.installed  ## rewrite requirements.lock from the venv (after changing a dependency)
	{ echo "# The venv's Python packages, pinned (constraints for every pip install in the Makefile). Written by"; \
	  echo "# \`make lock\` on Python $$($(PY) -c 'import platform; print(platform.python_version())'); do not edit by hand."; \
	  $(PY) -m pip freeze --exclude-editable --disable-pip-version-check | grep -v '^pip=='; } > requirements.lock
	touch $(BIN)/.installed-lab $(BIN)/.installed  # the venv is what the lock says

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

venv: $(BIN)/.installed  ## Python environment (.venv)

lab-servers:  ## MinIO, Toxiproxy (go install), DynamoDB Local (Maven): what `make demo` runs; cached
	@command -v go >/dev/null && command -v java >/dev/null && command -v mvn >/dev/null || \
	  { echo "the lab needs go, java (17+) and mvn on PATH"; exit 1; }
	@bash scripts/lab-deps.sh servers >/dev/null  # quiet once built; a build's output goes to a log it names

lab-deps: lab-servers  ## + the mount lab: fio + s3fs (apt), the lab's Mountpoint (cargo); cached
	@command -v cargo >/dev/null || { echo "the mount lab needs cargo (Rust) on PATH"; exit 1; }
	bash scripts/lab-deps.sh mounts

# The venv (pip: mostly downloads) and the servers (go install: CPU) are built side by side.
demo:  ## THE MAIN JOB: measure real replication in the local lab (table + chart)
	@$(MAKE) --no-print-directory -j2 $(BIN)/.installed-lab lab-servers
	@$(BIN)/replmon lab run $(ARGS)

bench: venv lab-deps  ## P1-P5 (docs/BENCH.md), P6 event ingestion (docs/BENCH-INGEST.md), stall detection (docs/BENCH-STALL.md), the lab fleet (docs/BENCH-FLEET.md), the collector vs N (docs/BENCH-COLLECTOR.md), M1-M3 mounts: runner overhead, Mountpoint vs s3fs (docs/BENCH-MOUNTS.md)
	$(BIN)/replmon lab bench $(ARGS)
	$(BIN)/replmon lab bench-ingest
	$(BIN)/replmon lab bench-stall
	$(BIN)/replmon lab bench-fleet
	$(BIN)/replmon lab bench-collector
	$(BIN)/replmon lab bench-mounts

lint: venv node_modules/.installed  ## ruff, mypy, cfn-lint, sam validate --lint, ASL lint
	$(BIN)/ruff check src tests functions
	$(BIN)/mypy
	$(BIN)/cfn-lint template.yaml
	$(BIN)/sam validate --lint
	$(BIN)/cfn-lint $(MOUNTS_TEMPLATE)
	$(BIN)/cfn-lint templates/member-region.yaml templates/member-account.yaml
	$(BIN)/sam validate --lint -t $(MOUNTS_TEMPLATE)
	node_modules/.bin/asl-validator --json-path statemachines/replication_probe.asl.json

build: venv  ## sam build (makefile build method; no Docker)
	$(BIN)/sam build

build-mounts: venv  ## sam build of the mount baselines' own stack (templates/mount-baselines.yaml)
	$(BIN)/sam build -t $(MOUNTS_TEMPLATE) --build-dir .aws-sam/mounts

runner-image:  ## the fio runner's image for ECS (x86_64, as the task definitions say): needs Docker
	docker build --platform $(RUNNER_PLATFORM) -f runners/fio/Dockerfile -t $(RUNNER_IMAGE) .

test: venv node_modules/.installed lab-deps  ## THE TESTS: lint once, then every test (moto and builds on 2 workers, then the real lab: its tests in order on one worker, the knee's long run on the other)
	$(MAKE) --no-print-directory lint
	$(BIN)/pytest -m "not lab" -n 2 --dist loadgroup --durations=20 $(ARGS)
	$(BIN)/pytest -m lab -n 2 --dist loadgroup --durations=40 $(ARGS)

test-knee: venv node_modules/.installed lab-deps  ## the lab's throttled mount alone: the knee where its credits ran out (4-5 min; in `make test` too, beside the other lab tests)
	$(BIN)/pytest -m knee $(ARGS)

test-fast: venv node_modules/.installed  ## no lab servers, no builds, no deployed-stack scenarios, no network (fio from apt once): at most 3 minutes on 2 cores (README)
	bash scripts/lab-deps.sh apt >/dev/null
	$(BIN)/pytest -m "not lab and not build and not deployed" -n 2 --dist loadgroup $(ARGS)

clean:  ## remove build output and lab data (keeps the caches)
	rm -rf .aws-sam lab-data

.PHONY: help venv lock lab-servers lab-deps demo bench lint build build-mounts runner-image test test-knee test-fast clean
