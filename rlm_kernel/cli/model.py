"""``rlm model status|prepare|serve``: the embedded model from the command line."""

from __future__ import annotations

import importlib.metadata
import sys
import time

from ..engine import prewarm
from ..models import (
    LocalModelError,
    ensure_server,
    find_running,
    get_spec,
    is_prepared,
    prepare,
    stop_server,
    weights_path,
)

__all__ = ["model_command", "prepare_with_progress"]


def prepare_with_progress(name: str | None = None) -> None:
    """Prepare the weights, printing progress to stderr when work is needed.

    Raises:
        LocalModelError: download, assembly or verification failed.
    """
    spec = get_spec(name)
    if is_prepared(spec):
        return
    print(f"Preparing {spec.title} ({spec.size / 1e9:.2f} GB, {spec.parts} parts)...",
          file=sys.stderr, flush=True)

    def progress(done: int, total: int) -> None:
        print(f"  part {done}/{total}", file=sys.stderr, flush=True)

    path = prepare(spec.name, progress=progress)
    print(f"Ready: {path} (SHA-256 verified)", file=sys.stderr, flush=True)


def _llama_version() -> str:
    try:
        return importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return "not installed (pip install 'rlm-kernel[local]')"


def model_command(action: str, name: str | None) -> int:
    """Run one ``rlm model`` action; returns the exit code."""
    try:
        spec = get_spec(name)
        if action == "status":
            path = weights_path(spec)
            state = "ready (verified)" if is_prepared(spec) else (
                "present, not verified" if path.exists() else "not prepared (rlm model prepare)")
            running = find_running(spec.name)
            print(f"model:      {spec.title}")
            print(f"licence:    Apache-2.0 (Qwen); SHA-256 {spec.sha256}")
            print(f"weights:    {path}: {state}")
            print(f"llama-cpp:  {_llama_version()}")
            print(f"server:     {running.api_base + f' (pid {running.pid})' if running else 'not running'}")
            return 0
        if action == "prepare":
            prepare_with_progress(spec.name)
            print(weights_path(spec))
            return 0
        t0 = time.monotonic()
        info = ensure_server(spec.name)
        prewarm(f"local/{spec.name}").join()  # the system prompt read before "Serving"
        print(f"Serving {spec.name} at {info.api_base} (pid {info.pid}, ready in "
              f"{time.monotonic() - t0:.1f} s). Ctrl-C stops it.", flush=True)
        try:
            while find_running(spec.name) is not None:
                time.sleep(2)
        except KeyboardInterrupt:
            pass
        stop_server(spec.name)
        return 0
    except LocalModelError as exc:
        print(f"rlm: error: {exc}", file=sys.stderr)
        return 1
