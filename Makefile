# thrifty: `make demo` sets up and plans for the built-in default workload; `make test` sets up and tests.
#
# Installs are reproducible: every package comes at the version pinned in requirements/lock.txt (pip -c),
# thrifty itself is built by the pinned setuptools (--no-build-isolation), and torch is the CPU wheel
# (found through pip's find-links, PIP_FIND_LINKS; pyproject keeps torch>=2.4 so a bare install never
# pins a build). `make lock` refreshes the lock on purpose: after a change to pyproject's dependencies
# or requirements/lock.in it keeps the other pins and adds what is new; `make lock LOCK_FLAGS=--upgrade`
# moves every package to its newest allowed release. Both run unattended; commit the result.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := requirements/lock.txt
PIP_INSTALL := $(BIN)/pip install -q -c $(LOCK) --no-build-isolation

# The lock is for CPython 3.11 on x86_64 Linux with glibc 2.36 (Debian 12, our machines); OpenMM 8.6's
# wheels need glibc 2.34.
LOCK_VENV := .venv-lock
UV := uv==0.13.9
LOCK_PLATFORM := --python-version 3.11 --python-platform x86_64-manylinux_2_36
WHEELS ?= $(or $(PIP_FIND_LINKS),/opt/wheels)
LOCK_FLAGS ?=

$(STAMP): pyproject.toml $(LOCK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -c $(LOCK) pip setuptools
	$(PIP_INSTALL) -e '.[all,test]'
	touch $(STAMP)

.PHONY: install demo test test-fast lint browser bench lock clean
install: $(STAMP)

demo: $(STAMP)
	$(BIN)/thrifty plan --workload builtin:resnet18-cifar10 --db .thrifty/demo.db --plot .thrifty/plan.png

# the browser test (tests/serve) drives Debian's headless Chromium; installed once where missing (root),
# else that test skips and says why
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		apt-get install -y -q chromium chromium-driver >/dev/null 2>&1 || \
		echo "chromium could not be installed: the browser test will skip"

# Tests. `make test` runs all of them (-n 2: two processes; worksteal: an idle process takes tests queued for
# the other, so a long test near the end does not leave one core idle). `make test-fast` is the tier to run before each
# commit: the pure numpy/scipy packages (planner, catalog, performance models, preemption models, the store),
# without the tests marked slow, ray, openmm or distributed, so no torch worker processes, no Ray and no
# OpenMM; under a minute on two cores. The markers are given by rule in tests/conftest.py (see
# tests/suite_markers.py; slow ones are listed in tests/slow_tests.txt); `-m` picks any other tier, e.g.
# `pytest -m "not ray and not openmm"` where those extras are not installed.
TEST_ENV := GLOO_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1
FAST_TESTS := tests/plan tests/catalog tests/perf tests/transient tests/test_store.py tests/test_records.py \
	tests/test_suite_markers.py tests/test_nothing_imports_tests.py
test: $(STAMP) browser
	$(TEST_ENV) $(BIN)/python -m pytest -q -n 2 --dist worksteal tests

test-fast: $(STAMP)
	$(TEST_ENV) $(BIN)/python -m pytest -q -n 2 -m "not slow and not ray and not openmm and not distributed" $(FAST_TESTS)

# ruff (pyflakes, bugbear, isort, pyupgrade) over src/, tests/ and benchmarks/, mypy over src/, as pyproject configures them
lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

# `make bench` runs every benchmark (hours); `make bench TAGS=quick` (or md, long, gpu; comma-separated)
# a subset. Then docs/results.md is rendered again from benchmarks/results/*.json.
TAGS ?=
bench: $(STAMP)
	$(PIP_INSTALL) -e '.[all,test,bench]'
	$(BIN)/python benchmarks/run_all.py $(if $(TAGS),--tags $(TAGS))
	$(BIN)/python benchmarks/render_results.py

lock:
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install -q $(UV)
	$(LOCK_VENV)/bin/uv pip compile pyproject.toml requirements/lock.in --extra all --extra test --extra bench \
		$(LOCK_PLATFORM) --find-links $(WHEELS) --quiet --custom-compile-command "make lock" $(LOCK_FLAGS) -o $(LOCK)

clean:
	rm -rf $(VENV) $(LOCK_VENV) .thrifty build *.egg-info
