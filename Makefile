# `make run` and `make test` work on a fresh machine: they create .venv and install first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What running needs (`make run`), then that and the test and dev tools (everything else).
RUN_STAMP := $(VENV)/.run-installed
STAMP := $(VENV)/.installed

.PHONY: run test test-fast lint llama bench mutate clean bytecode

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[postgres,semantic]'
	touch $@

$(STAMP): $(RUN_STAMP)
	$(BIN)/pip install --quiet -e '.[test,dev,postgres,semantic]'
	touch $@

# The project's own bytecode, written ahead (only what changed: a fraction of a second).
# pip writes it for what it installs, but not for this editable checkout, and where
# PYTHONDONTWRITEBYTECODE is set (as on some build machines) every `cambium` process would
# compile every module it imports (measured at a million lines: the daemon's start 2.0
# against 1.5 s, a CLI recall with the daemon down 1.47 against 1.2-1.35 s).
bytecode: $(RUN_STAMP)
	$(BIN)/python -m compileall -q daemon receptors rhythms

run: $(RUN_STAMP) bytecode
	$(BIN)/cambium run $(if $(CONFIG),--config $(CONFIG))

# Everything, on both cores: tests/unit, tests/integration, tests/acceptance (the real
# `cambium` process) and tests/reliability.
test: $(STAMP) bytecode
	$(BIN)/pytest -n 2 $(PYTEST_ARGS)

# The inner loop: the unit and integration tests and the in-process reliability ones, on
# both cores; nothing that starts `cambium` as a subprocess.
test-fast: $(STAMP)
	$(BIN)/pytest tests/unit tests/integration tests/reliability -m "not subprocess" -n 2 $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The real model server for the llama.cpp acceptance test (the `llama` extra). llama.cpp is
# compiled for a plain x86-64: a build tuned to the machine compiling it (GGML_NATIVE) dies
# with an illegal instruction on CPUs that lack what it assumed (AVX-512, AMX). About 8 min on
# two cores once; pip's wheel cache (~/.cache/pip) makes it seconds after that.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
  -DGGML_AMX_BF16=OFF
$(VENV)/.llama-installed: $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/pip install --quiet -e '.[llama]'
	touch $@

llama: $(VENV)/.llama-installed

# The benchmark's own dependency (huey, a peer measured beside the bus) is an extra of its own.
$(VENV)/.bench-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $@

bench: $(VENV)/.bench-installed bytecode
	$(BIN)/python -m bench

# Mutation testing with mutmut (configured in pyproject.toml, [tool.mutmut]): run before a
# release, never in `make test` or CI (it takes hours on two cores). With
# CAMBIUM_TEST_POSTGRES_URL set, the PostgreSQL cases run too. Select mutants with MUTANTS,
# e.g. make mutate MUTANTS='daemon.core.strength*'.
MUTATE_JOBS ?= 2
MUTANTS ?=
$(VENV)/.mutate-installed: $(STAMP)
	$(BIN)/pip install --quiet -e '.[mutate]'
	touch $@

mutate: $(VENV)/.mutate-installed
	rm -rf mutants
	$(BIN)/mutmut run --max-children $(MUTATE_JOBS) $(MUTANTS)
	$(BIN)/mutmut results

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache mutants
