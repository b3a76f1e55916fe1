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

.PHONY: setup demo test test-fast lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

setup: $(PY)
	bash scripts/install_browser.sh
	bash scripts/install_sandbox.sh
	@if [ "$$(cat $(LLAMA_BUILT) 2>/dev/null)" != "$$CMAKE_ARGS" ]; then \
	  echo "building llama-cpp-python for this CPU (a few minutes)"; \
	  $(PY) -m pip install --quiet --no-cache-dir --force-reinstall --no-deps \
	    "$$($(PY) scripts/local_requirement.py)" && echo "$$CMAKE_ARGS" > $(LLAMA_BUILT); fi
	$(PY) -m pip install --quiet -e ".[local,dev]"
	$(PY) -m rlm_kernel install --sys-prefix
	$(PY) -m ipykernel install --sys-prefix
	$(RLM) model prepare

# The main job: a question about the interpreter's own standard library, answered
# by the embedded model and checked against Python's ast.
demo: setup
	$(PY) scripts/demo.py

test: setup
	$(PY) -m pytest -v --nbval-lax tests notebooks

test-fast: $(PY)
	$(PY) -m pytest -m "not slow" -q

lint:
	$(VENV)/bin/ruff check rlm_kernel tests bench scripts

bench: setup
	$(PY) -m pip install --quiet -e ".[bench]"
	for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache
