# tunedeck: `make run` starts the server with a demo; `make test` runs the whole suite.
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RAY_STAMP := $(VENV)/.installed-ray
TRACKERS_STAMP := $(VENV)/.installed-trackers
MLX_STAMP := $(VENV)/.installed-mlx

.PHONY: install install-cuda install-ray install-trackers install-mlx system-deps run test test-fast test-soak lint bench clean

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

# Ray Train, for jobs across several machines (`tunedeck worker --ray-address`); optional, so `make run`
# goes without it. requirements.lock constrains it: Ray never moves a package the platform pinned.
install-ray: install $(RAY_STAMP)

$(RAY_STAMP): requirements-ray.lock requirements.lock $(STAMP)
	$(PY) -m pip install -q -c requirements.lock -r requirements-ray.lock
	touch $(RAY_STAMP)

# Experiment trackers (MLflow, TensorBoard, Weights & Biases, trackio) for jobs' report_to; optional, so
# `make run` goes without them (a job asking for a missing one trains on, with a warning event).
install-trackers: install $(TRACKERS_STAMP)

$(TRACKERS_STAMP): requirements-trackers.lock requirements.lock $(STAMP)
	$(PY) -m pip install -q -c requirements.lock -r requirements-trackers.lock
	touch $(TRACKERS_STAMP)

# mlx and mlx-lm, for exports that open on Apple silicon (`tunedeck export --format mlx`); optional, so
# `make run` goes without them. On Linux this is mlx's CPU build, which the export checks and tests run on.
install-mlx: install $(MLX_STAMP)

$(MLX_STAMP): requirements-mlx.lock requirements.lock $(STAMP)
	$(PY) -m pip install -q -c requirements.lock -r requirements-mlx.lock
	touch $(MLX_STAMP)

system-deps:
	bash scripts/ensure_system_deps.sh

run: install
	$(VENV)/bin/tunedeck demo

# The suite runs in TEST_PROCESSES pytest processes (pytest-xdist), each test file whole in one of them so that
# its module fixtures are built once; most tests wait on other processes (servers, workers, training runs).
TEST_PROCESSES ?= 2

test: install install-ray install-trackers install-mlx system-deps
	TUNEDECK_REQUIRE_POSTGRES=1 TUNEDECK_REQUIRE_RAY=1 TUNEDECK_REQUIRE_TRACKERS=1 TUNEDECK_REQUIRE_MLX=1 \
		$(PY) -m pytest -q -n $(TEST_PROCESSES) --dist loadfile

# The quick lane while working: unit and contract tests, the slow ones left out (under 3 minutes).
test-fast: install system-deps
	TUNEDECK_REQUIRE_POSTGRES=1 $(PY) -m pytest -q -m "not slow" tests/unit tests/contract

# The whole suite once on a quiet machine, then 3 times beside a CPU hog; see test-artifacts/soak/.
test-soak: install system-deps
	bash scripts/soak_tests.sh $(PY)

lint: install
	$(VENV)/bin/ruff check tunedeck tests benchmarks
	$(VENV)/bin/mypy tunedeck
	$(VENV)/bin/lint-imports

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
