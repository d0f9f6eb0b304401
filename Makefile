# thrifty: `make demo` sets up and plans for the built-in default workload; `make test` sets up and tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# torch is pinned here (a CPU wheel); pyproject keeps torch>=2.4 so a bare install never pulls a CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0 numpy
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

.PHONY: install demo test bench clean
install: $(STAMP)

demo: $(STAMP)
	$(BIN)/thrifty plan --workload builtin:resnet18-cifar10 --db .thrifty/demo.db --plot .thrifty/plan.png

test: $(STAMP)
	GLOO_SOCKET_IFNAME=lo MASTER_ADDR=127.0.0.1 $(BIN)/python -m pytest -q -n 2 tests

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .thrifty build *.egg-info
