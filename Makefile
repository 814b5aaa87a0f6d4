# Quick start: `make demo` and `make test` on a fresh machine with Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-portable test-adapters docs bench clean

$(STAMP): pyproject.toml requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m genpqr demo --out demo-output

# two xdist workers on two cores: one BLAS/OpenMP thread each avoids oversubscription
THREADS := OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

test: $(STAMP)
	$(THREADS) $(PY) -m pytest -n 2 --durations=15

test-fast: $(STAMP)
	$(THREADS) $(PY) -m pytest -n 2 -m "not slow"

# the suite on another instruction set: numpy and OpenBLAS restricted to SSE kernels, torch to its
# default (no AVX) kernels -- results must hold to the tolerances the math guarantees, not to the
# rounding of one CPU (CI machines differ from yours; run it before tightening a tolerance)
PORTABLE := NPY_DISABLE_CPU_FEATURES="X86_V3 X86_V4 AVX512_ICL AVX512_SPR" OPENBLAS_CORETYPE=Prescott \
	ATEN_CPU_CAPABILITY=default

test-portable: $(STAMP)
	$(THREADS) $(PORTABLE) $(PY) -m pytest -n 2 -q

# dataset adapters on datasets built by Minari, d3rlpy and imitation: their gymnasium pins
# cannot share the main environment, so they get their own (requirements-adapters.txt)
ADAPTERS_VENV := .venv-adapters
ADAPTERS_STAMP := $(ADAPTERS_VENV)/.installed

$(ADAPTERS_STAMP): pyproject.toml requirements-adapters.txt
	$(PYTHON) -m venv $(ADAPTERS_VENV)
	$(ADAPTERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(ADAPTERS_VENV)/bin/python -m pip install --quiet -r requirements-adapters.txt
	$(ADAPTERS_VENV)/bin/python -m pip install --quiet --no-deps -e .
	touch $(ADAPTERS_STAMP)

test-adapters: $(ADAPTERS_STAMP)
	GENPQR_REQUIRE_ADAPTERS=1 $(THREADS) $(ADAPTERS_VENV)/bin/python -m pytest -m adapters tests/test_adapters.py tests/test_transfer.py

# the documentation site (Sphinx; docs/conf.py): README and docs/*.md, the API reference generated from the
# docstrings, and the gallery (examples/gallery/plot_*.py), every example run while the site is built. Strict:
# a broken cross-reference or a failing example fails the build (the docstrings' own warnings are listed, not
# fatal, until DOCSTRING_WARNINGS_FAIL in docs/conf.py is set). Open build/docs/index.html.
docs: $(STAMP)
	$(THREADS) $(PY) -m sphinx -b html -W --keep-going -q -j 2 docs build/docs
	@echo "built build/docs/index.html"

bench: $(STAMP)
	$(PY) benchmarks/tabular_solver.py

clean:
	rm -rf $(VENV) $(ADAPTERS_VENV) demo-output .pytest_cache .hypothesis build/docs docs/api docs/gallery \
		docs/sg_execution_times.rst
