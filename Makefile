# tunedeck: `make run` starts the server with a demo; `make test` runs the whole suite.
VENV ?= .venv
# The Python the virtualenv is made with: python3.11 where it is installed (pyproject.toml's requires-python).
PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
PY := $(VENV)/bin/python
PIP_VERSION := 26.3
HOST_PLAN := $(VENV)/host-plan.env
STAMP := $(VENV)/.installed
RAY_STAMP := $(VENV)/.installed-ray
TRACKERS_STAMP := $(VENV)/.installed-trackers
MLX_STAMP := $(VENV)/.installed-mlx

.PHONY: install check-host check-locks system-deps install-ray install-trackers install-mlx run test test-fast test-soak lint bench clean

install: $(STAMP)

# The host check runs first and stops before any download when the machine cannot run the install; it chooses
# torch's variant (cpu, cuda with requirements-cuda.lock, rocm from torch's ROCm index, apple) and writes the plan
# the pip step reads. TORCH_VARIANT=cpu|cuda|rocm forces a variant; TORCH_INDEX_URL names a wheel index for torch.
$(STAMP): requirements.lock requirements-cuda.lock pyproject.toml
	$(PYTHON) scripts/check_host.py --venv $(VENV) --plan $(HOST_PLAN)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q pip==$(PIP_VERSION)
	. "$(abspath $(HOST_PLAN))" && $(PY) -m pip install -q -r requirements.lock $$LOCK_ARGS \
		$${TORCH_INDEX_URL:+--extra-index-url "$$TORCH_INDEX_URL"}
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $(STAMP)

# The host check alone: what this machine is, the torch variant it would get, and what stands in the way.
check-host:
	$(PYTHON) scripts/check_host.py --venv $(VENV)

# Every lock resolved from the package registry alone (metadata only, nothing installed): run in CI.
check-locks: install
	$(PY) scripts/check_locks.py

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
	$(VENV)/bin/ruff check tunedeck tests benchmarks scripts
	$(VENV)/bin/mypy tunedeck
	$(VENV)/bin/lint-imports

bench: install
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
