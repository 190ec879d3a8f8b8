# sda-fusion: the two commands a user needs are `make run` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
JARS := var/jars/.resolved

.PHONY: setup lock run lint test test-fast simulate bench clean help

help:
	@echo "make run        install, start Airflow with the pipeline, feed simulated sensors, process end to end"
	@echo "make test       install and run the whole test suite (what CI runs)"
	@echo "make test-fast  the unit tests: every test that needs no Spark server (under 5 minutes)"
	@echo "make lock       pin requirements.txt's packages with their hashes into requirements.lock (what setup installs)"
	@echo "make lint       ruff and the import-layer contracts (make test runs it first)"
	@echo "make bench      run the benchmarks in bench/ (tens of minutes; figures in bench/results/ and docs/performance.md)"
	@echo "make clean      delete run output under var/ (keeps the venv and the jar cache)"

setup: $(STAMP) $(JARS)

# One lock file (requirements.lock, every package pinned with its hashes) installed by uv, a fast
# resolver and installer: `make lock` makes it again from requirements.txt. The compose image installs
# the same file (Dockerfile).
UV_VERSION := 0.13.8
$(STAMP): requirements.lock pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version' 
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)
	$(VENV)/bin/uv pip sync --quiet --python $(PY) requirements.lock
	$(VENV)/bin/uv pip install --quiet --python $(PY) --no-deps -e .
	touch $(STAMP)

# requirements.txt's pins resolved for Python 3.11 on x86_64 Linux (this machine and the image), with hashes
lock: $(STAMP)
	$(VENV)/bin/uv pip compile --quiet requirements.txt -o requirements.lock --python-version 3.11 \
	    --python-platform x86_64-manylinux_2_28 --generate-hashes

# Delta's jars from Maven Central, once; every Spark process then loads them from var/jars offline.
$(JARS): $(STAMP)
	$(PY) -m sda.lake.spark
	touch $(JARS)

run: setup
	bash scripts/run.sh

# Test files run in TEST_WORKERS processes (pytest-xdist; a file's tests stay together, so a module's
# fixtures are built once) against one shared Spark Connect server; TEST_WORKERS=0 runs them in-process.
# --no-loadscope-reorder: files start in the order tests/conftest.py gives (slow files first), not
# by their number of tests, so the long live tests (compose, end-to-end) overlap the rest.
TEST_WORKERS ?= 3
PYTEST_WORKERS = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)

# ruff (pyproject.toml [tool.ruff]) and the package layers of include/sda (pyproject.toml [tool.importlinter]).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-logo --no-cache

test: lint
	$(PY) -m pytest -ra --durations=25 $(PYTEST_WORKERS)

test-fast: lint
	$(PY) -m pytest -ra -m "not slow and not spark" $(PYTEST_WORKERS)

# Benchmarks print their figures and write them to bench/results/<name>.json (long: see each docstring);
# bench/report.py puts them into docs/performance.md's tables.
bench: setup
	$(PY) bench/incremental.py
	$(PY) bench/latency.py
	$(PY) bench/screening.py
	$(PY) bench/correlation.py
	$(PY) bench/throughput.py
	$(PY) bench/report.py --write

clean:
	rm -rf var/lakehouse var/landing var/outbox var/airflow var/catalog var/reports var/bench var/landing-watch var/ephemeris
