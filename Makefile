# Quick start: `make demo` and `make test` on a fresh machine with Python 3.11.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-portable test-adapters docs docs-check chromium wheel-check bench bench-front-door architecture clean

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
	$(THREADS) $(PY) -m pytest -n 2 --dist worksteal --durations=15

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
	GENPQR_REQUIRE_ADAPTERS=1 $(THREADS) $(ADAPTERS_VENV)/bin/python -m pytest -m adapters tests/data/test_adapters.py tests/counterfactuals/test_transfer.py

# the package's shape in numbers (issue 30): where a GenPQR is built from a config, where each kind of
# command-line name is parsed, fitted attributes written outside the estimator, public names, GenPQR's
# parameters, the largest function and module (tests/test_architecture_report.py checks them)
architecture: $(STAMP)
	$(PY) tools/architecture.py

# the documentation site (Sphinx; docs/conf.py): docs/*.md, the API reference generated from the docstrings,
# and the gallery (examples/gallery/plot_*.py), every example run while the site is built. Strict: any warning
# fails the build (a broken cross-reference, reST markup or maths, in a page or a docstring) and so does a
# failing example. Sphinx prints each phase with its progress (2 to 4 minutes on two cores). Open
# build/docs/index.html.
docs: $(STAMP)
	@echo "make docs: the API pages, the gallery's examples (run), then every page written (2 to 4 minutes)"
	$(THREADS) $(PY) -m sphinx -b html -W --keep-going -j 2 docs build/docs
	@echo "built build/docs/index.html"

# the built site and a fit report opened in headless Chromium (tests/docs/test_browser.py): nothing wider than
# its column, maths rendered, navigation on every page; run after `make docs` (CI does)
docs-check: $(STAMP) chromium
	GENPQR_DOCS_SITE=build/docs $(THREADS) $(PY) -m pytest -p no:cacheprovider -q tests/docs/test_browser.py

# Debian's Chromium and its driver, for the browser checks; installed when missing (needs root, as on CI)
chromium:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else echo "make chromium: install Debian's chromium and chromium-driver (as root) for the browser checks"; fi

# the package as a user gets it: `python -m build` makes the sdist and, from it, the wheel; `twine check`;
# the wheel installed with its extras [dask,rl] into a fresh virtual environment (dev pins as constraints)
# and with [adapters] into one layered on the adapters environment (resolved against its pinned packages:
# nothing but genpqr may need installing); tests/app/test_wheel.py then checks what the archives hold and runs
# the installed `genpqr` outside the checkout (--version, a fit of the bundled data set, the extras' imports)
WHEEL_DIR := build/wheel-check
WHEEL_VENV := $(WHEEL_DIR)/venv
WHEEL_ADAPTERS_VENV := $(WHEEL_DIR)/venv-adapters
PURELIB := -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"

wheel-check: $(STAMP) $(ADAPTERS_STAMP)
	rm -rf $(WHEEL_DIR)
	$(PY) -m build --quiet --outdir $(WHEEL_DIR)/dist .
	$(PY) -m twine check --strict $(WHEEL_DIR)/dist/*
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet -c requirements-dev.txt "$$(ls $(WHEEL_DIR)/dist/*.whl)[dask,rl]"
	$(PYTHON) -m venv $(WHEEL_ADAPTERS_VENV)
	$(ADAPTERS_VENV)/bin/python $(PURELIB) > "$$($(WHEEL_ADAPTERS_VENV)/bin/python $(PURELIB))/genpqr_adapters_env.pth"
	sed -E 's/\[[^]]*\]//' requirements-adapters.txt > $(WHEEL_DIR)/adapters-constraints.txt  # pip: no extras here
	$(WHEEL_ADAPTERS_VENV)/bin/python -m pip install --quiet --report $(WHEEL_DIR)/adapters-install.json \
		-c $(WHEEL_DIR)/adapters-constraints.txt "$$(ls $(WHEEL_DIR)/dist/*.whl)[adapters]"
	GENPQR_WHEEL_CHECK=$(WHEEL_DIR) $(THREADS) $(PY) -m pytest -p no:cacheprovider tests/app/test_wheel.py

# every front-door command of issue 31 in one table: its time end to end, its floor, the ratio, the target
# (docs/benchmarks.md, "The front door in one table")
bench-front-door: $(STAMP)
	$(THREADS) $(PY) benchmarks/bench_front_door.py

bench: $(STAMP)
	$(PY) benchmarks/tabular_solver.py

clean:
	rm -rf $(VENV) $(ADAPTERS_VENV) build dist src/genpqr.egg-info demo-output .pytest_cache .hypothesis \
		docs/api docs/gallery docs/sg_execution_times.rst
