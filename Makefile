# Every target bootstraps .venv from nothing, so a fresh clone needs only `make demo` / `make test`.
# Debian's CPython 3.11 where the machine has it: Debian builds it with profile-guided
# optimisation, the pyenv build on PATH has none, and the trace-driven simulator (pure
# Python) runs ~25 % faster on it (benchmarks/sim_speed.py records which one ran).
PYTHON ?= $(shell test -x /usr/bin/python3.11 && /usr/bin/python3.11 -m venv --help >/dev/null 2>&1 && echo /usr/bin/python3.11 || echo python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# The pure layers (no Ray; tests/unit/test_purity.py): ruff-formatted and mypy-strict.
PURE := lyra_ray/model lyra_ray/autoscale lyra_ray/scheduling lyra_ray/sim lyra_ray/telemetry lyra_ray/network lyra_ray/parallelism lyra_ray/policies lyra_ray/placement
export RAY_USAGE_STATS_ENABLED := 0
export PYTHONUNBUFFERED := 1

.PHONY: demo demo-sim test test-unit lint bench clean prometheus chromium redis native

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: 2.13.0 is the CPU build on disk; anything else pulls a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

# The simulator's compiled core (lyra_ray/native.py): rebuilt only when a source changed;
# without a C compiler the simulator runs interpreted (CI, LYRA_CI=1, requires the build).
native: $(STAMP)
	@scripts/ensure_deb.sh gcc "the simulator's compiled core"
	@scripts/ensure_deb.sh python3.11-dev "the simulator's compiled core" \
	  "$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h"
	@$(PY) scripts/build_native.py $(if $(LYRA_CI),--strict)

demo: $(STAMP)
	@if [ -f scripts/demo.py ]; then $(PY) scripts/demo.py; else $(MAKE) --no-print-directory demo-sim; fi

demo-sim: $(STAMP) native
	$(VENV)/bin/lyra simulate --trace lyra_ray/data/demo_jobs.yaml --cluster v100=8,p100=8,k80=16 \
	  --gpus-per-node 4 --policy fifo_nonpreemptive --json demo-out/report.json --plots demo-out

prometheus:
	@scripts/ensure_deb.sh prometheus "the observability test"

chromium:
	@scripts/ensure_deb.sh chromium "the page test"

redis:
	@scripts/ensure_deb.sh redis-server "the head-recovery test"

# PYTHONFAULTHANDLER: a crash after pytest's own summary (its fault handler is off by then)
# still prints every thread's stack; one whole run ended "Segmentation fault" there.
# Two test processes (pytest-xdist), each running one module at a time, longest first
# (tests/conftest.py), each with its own clusters and Ray temp dir: a live module spends
# much of its time waiting on Ray, and the other process runs in those waits. The
# modules marked `alone` run after the rest, serially: the planner ranking times real
# computation, and the serving modules bound their traffic's failures and latency,
# which a second live module beside them broke (docs/testing.md, "Two processes").
# TEST_PROCS=0 runs the first phase in one process too.
TEST_PROCS ?= 2
PYTEST := PYTHONFAULTHANDLER=1 $(PY) -m pytest -q -p no:cacheprovider
XDIST = $(if $(filter-out 0,$(TEST_PROCS)),-n $(TEST_PROCS) --dist loadfile --no-loadscope-reorder)

test: $(STAMP) native prometheus chromium redis
	status=0; \
	$(PYTEST) $(XDIST) -m "not alone" --durations=15 --junitxml=build/junit.xml tests || status=$$?; \
	$(PYTEST) -m alone --durations=5 --junitxml=build/junit-alone.xml tests || status=$$?; \
	exit $$status

test-unit: $(STAMP)
	$(PYTEST) $(XDIST) tests/unit tests/sim

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check $(PURE)
	$(VENV)/bin/mypy $(PURE) lyra_ray/native.py lyra_ray/contract lyra_ray/client lyra_ray/ops lyra_ray/runtime lyra_ray/serving

# suite_times and suite_cpu record a run of `make test` itself (its junit files, or the
# command they wrap): they are run around the suite, not on their own.
bench: $(STAMP) native
	@for b in benchmarks/[!_]*.py; do \
		case $$b in */suite_times.py|*/suite_cpu.py) continue;; esac; \
		echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) demo-out *.egg-info build/native
