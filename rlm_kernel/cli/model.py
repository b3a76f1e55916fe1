"""``rlm model status|prepare|serve|stop``: the embedded model from the command line;
``serve --replicas N`` starts N servers and prints the fleet file for them."""

from __future__ import annotations

import importlib.metadata
import sys
import time
from pathlib import Path

from ..engine.frontends import prewarm
from ..models import (
    LocalModelError,
    describe_status,
    ensure_server,
    find_running,
    fleet_yaml,
    get_spec,
    is_prepared,
    prepare,
    read_status,
    running_replicas,
    start_replicas,
    stop_replicas,
    stop_running,
    stop_server,
    weights_path,
)

__all__ = ["FLEET_MODEL_NAME", "model_command", "prepare_with_progress", "serve_replicas"]

FLEET_MODEL_NAME = "local-fleet"
"""The model_name of the fleet ``rlm model serve --replicas`` prints."""


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


def serve_replicas(count: int, name: str | None = None,
                   fleet_file: str | None = None) -> int:
    """``rlm model serve --replicas N``: start ``count`` servers of the embedded model
    (:func:`~rlm_kernel.models.local.server.start_replicas`), print the fleet file for
    them (model_name :data:`FLEET_MODEL_NAME`, one deployment per server, one request at
    a time each) to stdout, write it to ``fleet_file`` too when given, and serve until
    Ctrl-C (or until every server has died), then stop them all.  Returns the exit code.

    Raises:
        LocalModelError: the weights cannot be prepared or a server cannot start.
    """
    spec = get_spec(name)
    prepare_with_progress(spec.name)
    t0 = time.monotonic()
    try:
        infos = start_replicas(count, spec.name)
        text = fleet_yaml(FLEET_MODEL_NAME, [info.api_base for info in infos],
                          model=f"openai/{spec.name}")
        if fleet_file:
            Path(fleet_file).expanduser().write_text(text, encoding="utf-8")
        print(text, end="", flush=True)
        where = f", fleet file {fleet_file}" if fleet_file else ""
        print(f"Serving {count} replica(s) of {spec.name} (ready in "
              f"{time.monotonic() - t0:.1f} s{where}); use it with rlm run --router FILE "
              f"--model {FLEET_MODEL_NAME}. Ctrl-C stops them.", file=sys.stderr, flush=True)
        alive = count
        while alive:
            time.sleep(2)
            now = len(running_replicas())
            if now < alive:
                print(f"rlm: {alive - now} replica(s) stopped; {now} still serving",
                      file=sys.stderr, flush=True)
            alive = now
        return 1  # every server died
    except KeyboardInterrupt:
        return 0
    finally:
        stop_replicas()


def model_command(action: str, name: str | None, *, replicas: int | None = None,
                  fleet_file: str | None = None) -> int:
    """Run one ``rlm model`` action; returns the exit code (2: bad options).

    Args:
        action: ``status``, ``prepare``, ``serve`` (until Ctrl-C, which stops the server
            at once, a request in flight or not) or ``stop`` (the running server, whichever
            process started it).
        name: embedded model short name (None: the default).
        replicas: ``serve`` only: start this many servers and print their fleet file
            (:func:`serve_replicas`); None: one server that other processes find.
        fleet_file: ``serve --replicas`` only: write the fleet file there too.
    """
    if (replicas is not None or fleet_file) and (action != "serve" or replicas is None):
        print("rlm: error: --replicas and --fleet-file go with 'rlm model serve "
              "--replicas N'", file=sys.stderr)
        return 2
    if replicas is not None and replicas < 1:
        print(f"rlm: error: --replicas must be at least 1, got {replicas}", file=sys.stderr)
        return 2
    try:
        if replicas is not None:
            return serve_replicas(replicas, name, fleet_file)
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
            if running is None:
                print("server:     not running (the next run starts it)")
            else:
                print(f"server:     {running.api_base} (pid {running.pid}): "
                      f"{describe_status(read_status(running.api_base))}")
            return 0
        if action == "prepare":
            prepare_with_progress(spec.name)
            print(weights_path(spec))
            return 0
        if action == "stop":
            try:
                stopped = stop_running(spec.name)
            except PermissionError:
                owner = find_running(spec.name)
                print(f"rlm: error: the {spec.name} server (pid "
                      f"{owner.pid if owner else '?'}) is another user's process: "
                      f"only that user or root can stop it", file=sys.stderr)
                return 1
            print(f"stopped the {spec.name} server (pid {stopped.pid})" if stopped
                  else f"no {spec.name} server runs")
            return 0
        t0 = time.monotonic()
        info = ensure_server(spec.name, keep_alive=0)  # this command holds it up
        prewarm(f"local/{spec.name}").join()  # the system prompt read before "Serving"
        started_elsewhere = (f"; started by another command, it stops itself after "
                             f"{info.keep_alive:g} idle seconds" if info.keep_alive > 0 else "")
        print(f"Serving {spec.name} at {info.api_base} (pid {info.pid}, ready in "
              f"{time.monotonic() - t0:.1f} s{started_elsewhere}). Ctrl-C stops it.",
              flush=True)
        try:
            while find_running(spec.name) is not None:
                time.sleep(0.5)
        except KeyboardInterrupt:
            # at once, a request in flight or not: uvicorn would wait for a streamed
            # reply on SIGTERM, so the grace is short (the server holds nothing to save)
            stop_running(spec.name, grace=0.5)
            return 0
        stop_server(spec.name)
        print(f"rlm: the {spec.name} server (pid {info.pid}) stopped", file=sys.stderr)
        return 0
    except (LocalModelError, ValueError) as exc:  # ValueError: $RLM_KEEP_ALIVE
        print(f"rlm: error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the fleet file cannot be written
        print(f"rlm: error: {exc.strerror or exc}: {exc.filename or fleet_file}",
              file=sys.stderr)
        return 1
