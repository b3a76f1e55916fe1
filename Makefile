# rlm-kernel: one command sets everything up and runs the demo, one runs the tests.
# Both are safe to run twice: the venv, the built llama.cpp wheel (pip's cache) and
# the verified model weights (~/.cache/rlm-kernel) are reused.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
RLM    := $(VENV)/bin/rlm
# llama-cpp-python builds from source here; these flags skip what we do not use.
CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF
# ggml builds for this CPU (-march=native); on x86_64 without AMX: its AMX matrix
# kernels crash (SIGSEGV in ggml_backend_amx_mul_mat) on the first prompt longer than
# one token on Xeon machines here that report AMX.  Explicit -mno-* flags win over
# -march=native in gcc and clang, so the kernels are left out of the build.
ifeq ($(shell uname -m),x86_64)
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
CMAKE_ARGS += "-DCMAKE_C_FLAGS=$(NO_AMX)" "-DCMAKE_CXX_FLAGS=$(NO_AMX)"
endif
export CMAKE_ARGS
# pip's wheel cache keys a built wheel by its version, not by CMAKE_ARGS: llama.cpp is
# rebuilt, the cache skipped, whenever the flags differ from those of the installed build.
LLAMA_BUILT := $(VENV)/.llama-cpp-cmake-args
export LITELLM_LOCAL_MODEL_COST_MAP := True

# What setup installs is locked, with the sha256 of every file (docs/development.md,
# "Dependencies and the lock"); `make lock` rewrites the locks from pyproject.toml.
LOCK       := requirements/dev.lock
BUILD_LOCK := requirements/build.lock
# The rollout tasks' library (bench/rollout_tasks.py): its sdist, hash-checked, kept in the venv.
TASKS_LOCK := requirements/tasks.lock
TASKS_DIR  := $(VENV)/share/rlm-tasks
PIP_LOCKED := $(PY) -m pip install --quiet --require-hashes
# The locks hold for every platform and every Python from this one on (the dev extra's
# trace viewer, arize-phoenix, needs 3.11); the package itself supports 3.10.
LOCK_PYTHON := 3.11
UV_COMPILE := $(VENV)/bin/uv pip compile --quiet --universal --python-version $(LOCK_PYTHON) --generate-hashes $(LOCK_FLAGS)

.PHONY: setup lock demo test test-fast lint bench docs docs-serve clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

setup: $(PY)
	bash scripts/install_browser.sh
	bash scripts/install_sandbox.sh
	bash scripts/install_mcp_servers.sh
	@$(PY) -c 'import sys; v = tuple(map(int, "$(LOCK_PYTHON)".split("."))); sys.exit(sys.version_info < v and f"make setup: the locks are for Python >= $(LOCK_PYTHON), $(VENV) has {sys.version.split()[0]}: make clean, then make setup PYTHON=python$(LOCK_PYTHON)")'
	$(PIP_LOCKED) -r $(BUILD_LOCK)
	@locked="$$($(PY) scripts/local_requirement.py)" || exit 1; \
	if [ "$$(cat $(LLAMA_BUILT) 2>/dev/null)" != "$$CMAKE_ARGS $$locked" ]; then \
	  echo "building llama-cpp-python for this CPU (a few minutes)"; \
	  echo "$$locked" > $(VENV)/llama-cpp-python.lock && \
	  $(PIP_LOCKED) --no-cache-dir --force-reinstall --no-deps --no-build-isolation \
	    -r $(VENV)/llama-cpp-python.lock && echo "$$CMAKE_ARGS $$locked" > $(LLAMA_BUILT); fi
	$(PIP_LOCKED) -r $(LOCK)
	$(PY) -m pip download --quiet --no-deps --no-binary :all: --require-hashes -r $(TASKS_LOCK) -d $(TASKS_DIR)
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	$(PY) -m rlm_kernel install --sys-prefix
	$(PY) -m ipykernel install --sys-prefix
	$(RLM) model prepare

# The main job: a question about the interpreter's own standard library, answered
# by the embedded model and checked against Python's ast.
demo: setup
	$(PY) scripts/demo.py

# The static checks first (lint), then the suite; lint runs after setup has made the venv.
# --durations: the 30 slowest tests at the end of the log, to keep the suite within CI's time.
test: setup
	$(MAKE) lint
	$(PY) -m pytest -v --durations=30 --nbval-lax tests notebooks

# Rewrite the locks from pyproject.toml (and requirements/build.in), keeping the versions
# already locked where they still fit; `make lock LOCK_FLAGS=--upgrade` takes the newest.
lock: $(PY)
	test -x $(VENV)/bin/uv || $(PY) -m pip install --quiet uv
	$(UV_COMPILE) pyproject.toml --extra local --extra dev $(BUILD_LOCK:.lock=.in) -o $(LOCK)
	$(UV_COMPILE) $(BUILD_LOCK:.lock=.in) -c $(LOCK) -o $(BUILD_LOCK)

test-fast: $(PY)
	$(PY) -m pytest -m "not slow" -q

# ruff; the import contracts ([tool.importlinter]); mypy on rlm_kernel ([tool.mypy]).
# It needs the venv of `make setup` and never runs setup itself.
lint:
	$(VENV)/bin/ruff check rlm_kernel tests bench scripts docs/hooks.py
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link or a
# docstring that names a parameter wrongly fails.  docs-serve: http://127.0.0.1:8000.
# (The variable silences Material's banner about its successor.)
docs: $(PY)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-serve: $(PY)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve

bench: setup
	$(PY) -m pip install --quiet -e ".[bench]"
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache
