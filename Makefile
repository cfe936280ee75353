# streamlab: `make demo` provisions the embedded single-machine lab, prints its health and runs
# the smoke study; `make demo-down` stops it again;
# `make test` sets everything up and runs the whole test suite (what CI runs).
PYTHON   ?= python3
VENV     := .venv
BIN      := $(VENV)/bin
PY       := $(BIN)/python
# Tools the venv installs (ansible-lint calls ansible-* by name) come first on PATH.
export PATH := $(CURDIR)/$(BIN):$(PATH)
# The PyPI `ansible` bundle whose collections match requirements.yml (offline fallback: only the
# collections requirements.yml names are taken from it, tools/collections_from_bundle.py).
ANSIBLE_BUNDLE := 12.3.0
INVENTORY ?= inventory/local
# make demo: the smoke study (studies/smoke.yml: 2 short runs, results/smoke/); DEMO_STUDY changes it.
DEMO_STUDY ?= studies/smoke.yml
LAB_HOSTS ?= 3

.PHONY: setup demo demo-down lab lab-down lint test unit jobs-test lab-test lab-test-deferred lock bench bench-experiment bench-reset \
	bench-engines bench-faults bench-taskmanager bench-study bench-exposure bench-guarantees \
	bench-three-engines bench-user-study equal-footing clean

setup: $(VENV)/.installed .collections/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

.collections/.installed: requirements.yml $(VENV)/.installed
	$(BIN)/ansible-galaxy collection install -r requirements.yml -p .collections --timeout 20 \
	  || $(PY) tools/collections_from_bundle.py --bundle $(ANSIBLE_BUNDLE)
	mkdir -p .collections && touch $@

# One line per phase, check and change on the terminal; the full output in logs/ (BRIEF= for all of it).
BRIEF ?= ANSIBLE_STDOUT_CALLBACK=streamlab_brief

demo: setup
	$(BRIEF) $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/site.yml
	$(BRIEF) $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/health.yml
	$(BIN)/streamlab-study $(DEMO_STUDY) -i $(INVENTORY)

# Stops every daemon of the kit on the embedded default and removes its topics and runtime state
# (binaries and the artifact cache stay; results/ is never touched).
demo-down: setup
	$(BRIEF) $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/teardown.yml -e confirm=yes

# LAB_FLAGS=--fresh rebuilds the hosts from scratch (what `make test` does).
lab: setup
	$(PY) tests/lab/testhosts.py up --hosts $(LAB_HOSTS) $(LAB_FLAGS)

lab-down:
	$(PYTHON) tests/lab/testhosts.py down

lint: setup
	$(BIN)/yamllint --strict .
	$(BIN)/ansible-lint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(PY) tools/check_docs.py
	for p in playbooks/*.yml; do $(BIN)/ansible-playbook --syntax-check -i inventory/local $$p || exit 1; done

unit: setup jobs-test
	$(BIN)/pytest -m 'not lab'

# The engine jobs' own unit tests (JUnit, with Maven).
jobs-test:
	mvn -q -B -f jobs/pom.xml test

lab-test: lab
	$(BIN)/pytest -m lab

# The lab tests make test leaves out for its time budget (docs/testing.md); needs test hosts.
lab-test-deferred: setup
	STREAMLAB_NO_SKIPS=1 $(BIN)/pytest -m deferred

# The engine jobs' unit tests, fresh test hosts, then every test (tests/run_suite.py): the lab's;
# beside them, at a low CPU weight, the linters, then the tests that need no test host (their
# output in logs/, printed after the lab's); last, alone, the realtime ones. Any of them failing
# fails make test. pytest exits 5 when it collects no test: make fails then.
# (Through a variable: a recipe line naming $(MAKE) itself runs even under make -n.)
BESIDE_FIRST = $(MAKE) --no-print-directory lint
test: setup jobs-test
	$(MAKE) lab LAB_FLAGS=--fresh
	STREAMLAB_NO_SKIPS=1 $(PY) tests/run_suite.py --durations=40 --beside-first '$(BESIDE_FIRST)'

# make lock COMPONENT=kafka VERSION=4.1.1 [LOCK_FLAGS="--source maven"]
lock: setup
	$(PY) roles/artifact/files/lock_artifacts.py $(COMPONENT) $(VERSION) $(LOCK_FLAGS)

bench: setup
	$(PY) bench/site_timing.py --hosts $(LAB_HOSTS)

# Needs converged test hosts (make lab, then site.yml; make test leaves them torn down).
bench-experiment: setup
	$(PY) bench/experiment_timing.py

# Needs converged test hosts: teardown, redeploy, and purge then site.yml, timed (leaves them converged).
bench-reset: setup
	$(PY) bench/reset_timing.py

# The test hosts converged with Flink's TLS off, for the benches that compare engines: the other
# engines have no TLS on their own traffic (bench/equal_footing_inventory.py).
EQUAL_INVENTORY := bench/out/lab-equal/hosts.yml
# bench-user-study's CPU samples, kept across its starts.
USER_STUDY_CPU := bench/out/studies-cpu.jsonl
equal-footing: setup
	$(PY) bench/equal_footing_inventory.py
	$(BIN)/ansible-playbook -i $(EQUAL_INVENTORY) playbooks/site.yml

# Needs test hosts (make lab): each engine's latency over repetitions, and its sustainable rate;
# ENGINES takes configurations, as `spark spark:spark_trigger=continuous`. Spark's rate searches
# get a p99 bound of 5 s (p99_limit_ms, the bench's own key): a result waits for its batch's
# trigger or its epoch's commit. The others keep the bench's 1 s.
ENGINES ?= flink storm spark:p99_limit_ms=5000 spark:spark_trigger=continuous,p99_limit_ms=5000
bench-engines: equal-footing
	$(PY) bench/engine_figures.py --inventory $(EQUAL_INVENTORY) --engines $(ENGINES)

# Needs converged test hosts: each engine under a worker failure, two settings, repetitions.
bench-faults: setup
	$(PY) bench/fault_figures.py

# Needs converged test hosts with no job running: each daemon's listening sockets and who reaches
# them (the control node, an address in no inventory, and node2 without the kit's table).
bench-exposure: setup
	$(PY) bench/exposure.py

# Needs converged test hosts with no job running: kills of a Flink TaskManager, each timed until
# it has rejoined the cluster (or never did).
bench-taskmanager: setup
	$(PY) bench/taskmanager_restarts.py

# Needs converged test hosts: the user's study at a scale that fits them (about an hour at 0.5).
BENCH_STUDY_SCALE ?= 0.5
# Then the engines' own evidence per run and setting (fault_figures.py reads the study's runs).
bench-study: setup
	$(BIN)/streamlab-study studies/flink-vs-storm.yml --scale $(BENCH_STUDY_SCALE) \
	  -i inventory/lab/hosts.yml --results bench/out/studies
	$(PY) bench/fault_figures.py --from-results bench/out/studies --bench "make bench-study" \
	  --runs "flink-vs-storm-scale$$(echo $(BENCH_STUDY_SCALE) | tr . p)-*"

# Needs converged test hosts: each engine under each delivery guarantee it offers, with a worker
# killed mid-run, 3 repetitions (a little over an hour), then the figures per engine and guarantee.
bench-guarantees: setup
	$(BIN)/streamlab-study bench/studies/guarantees-lab.yml -i inventory/lab/hosts.yml \
	  --results bench/out/studies
	$(PY) bench/guarantee_figures.py --from-results bench/out/studies --runs "guarantees-lab-*"

# Needs test hosts (make lab): the user's study at scale 1 on them, each engine's capacity
# measured first (bench/studies/flink-vs-storm-lab.yml: 27 runs, about 2.5 hours; resumable),
# the machine's CPU per kind of process sampled beside it (each start's samples appended).
bench-user-study: equal-footing
	$(PY) bench/process_cpu.py --append $(USER_STUDY_CPU) & sampler=$$!; \
	  trap 'kill $$sampler 2>/dev/null' EXIT INT TERM; \
	  $(BIN)/streamlab-study bench/studies/flink-vs-storm-lab.yml -i $(EQUAL_INVENTORY) \
	    --results bench/out/studies; status=$$?; kill $$sampler; wait $$sampler; \
	  exit $$status
	$(PY) bench/fault_figures.py --from-results bench/out/studies --runs "flink-vs-storm-lab-*" \
	  --cpu-samples $(USER_STUDY_CPU) --study flink-vs-storm-lab --bench "make bench-user-study"

# Needs test hosts (make lab): studies/three-engines.yml (Flink, Storm and Spark at least once,
# the worker process killed mid-run, 3 repetitions: about 40 minutes), then its figures.
bench-three-engines: equal-footing
	$(BIN)/streamlab-study studies/three-engines.yml -i $(EQUAL_INVENTORY) --results bench/out/studies
	$(PY) bench/three_engine_figures.py --from-results bench/out/studies --runs "three-engines-*"

clean:
	rm -rf $(VENV) .collections
