# tunedeck: `make run` starts the server with a demo; `make test` runs the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install install-cuda system-deps run test lint bench clean

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.lock
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

# QLoRA's 4-bit kernels (bitsandbytes) on a CUDA machine; never needed by the CPU suite.
install-cuda: install
	$(PY) -m pip install -q -r requirements-cuda.lock

system-deps:
	bash scripts/ensure_system_deps.sh

run: install
	$(VENV)/bin/tunedeck demo

test: install system-deps
	TUNEDECK_REQUIRE_POSTGRES=1 $(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check tunedeck tests benchmarks
	$(VENV)/bin/mypy tunedeck
	$(VENV)/bin/lint-imports

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
