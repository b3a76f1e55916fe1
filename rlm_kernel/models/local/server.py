"""Serve the embedded model with llama-cpp-python's OpenAI-compatible server.

The server runs as a child process on a free 127.0.0.1 port, is started on the
first call that needs it and reused by later calls, of this process and of others
(``rlm model status``, the next ``rlm run``, a kernel), which find it through its state
file (``discovery``).  It outlives the process that started it and stops itself after
``keep_alive`` idle seconds (:mod:`~rlm_kernel.models.local.keep_alive`; default
``$RLM_KEEP_ALIVE``, else 5 minutes), so consecutive commands share one warm server.
With ``keep_alive`` 0 (and for ``rlm model serve``) it stops when that process exits,
and is killed by Linux if that process dies (``launcher``).

``rlm model serve --replicas N`` starts N more servers of one model
(:func:`start_replicas`) for a model fleet (:mod:`rlm_kernel.models.router`): each on its
own port with its share of the cores and its own log, none in the state file, so the
single server other processes find is not one of them.
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..base import LLMError, Message
from ..litellm_client import LiteLLMClient
from ..usage import Completion, LLMCall
from .discovery import (
    ServerInfo,
    accepting,
    healthy,
    is_server,
    log_path,
    log_tail,
    read_state,
    remove_state,
    start_lock,
    write_state,
)
from .keep_alive import default_keep_alive
from .launcher import (
    DEFAULT_N_CTX,
    ServerSettings,
    free_port,
    server_command,
    spawner,
    with_parent_death,
)
from .tokens import counter_for
from .weights import (
    LocalModelError,
    LocalModelSpec,
    get_spec,
    is_prepared,
    prepare,
    weights_path,
)

log = logging.getLogger(__name__)

__all__ = ["ServerInfo", "LocalModelClient", "ensure_server", "find_running", "stop_server",
           "server_command", "DEFAULT_N_CTX", "DEFAULT_SETTINGS", "START_TIMEOUT",
           "ServerSettings", "replica_log_path", "running_replicas", "start_replicas",
           "stop_replicas"]

START_TIMEOUT = 180.0  # seconds to wait for the server to answer /v1/models
DEFAULT_SETTINGS = ServerSettings()
"""How a server started here runs (``bench/bench_step_speed.py`` measured the choice)."""
_lock = threading.Lock()
_servers: dict[str, tuple[subprocess.Popen, ServerInfo]] = {}
_replicas: list[tuple[subprocess.Popen, ServerInfo]] = []


def _lookup(spec: LocalModelSpec, *, clean: bool) -> ServerInfo | None:
    entry = _servers.get(spec.name)
    if entry and entry[0].poll() is None:  # ours and alive: no round trip per call
        return entry[1]
    info = read_state(spec)
    if info is None:
        return None
    if not is_server(info.pid):
        if clean:  # its server died without cleaning up (killed, or its host was)
            remove_state(spec, info.pid)
        return None
    return info if accepting(info) else None


def find_running(name: str | None = None) -> ServerInfo | None:
    """Return a running server for the embedded model, started here or elsewhere.

    A server busy generating counts: it is found by its pid and an accepted TCP
    connection, not by an HTTP answer it may take minutes to give.  A state file
    whose server is dead is removed (when no other process holds the start lock).

    Args:
        name: embedded model short name (default model if None).
    """
    spec = get_spec(name)
    with start_lock(spec, timeout=0) as locked:
        return _lookup(spec, clean=locked)


def ensure_server(name: str | None = None, *, settings: ServerSettings | None = None,
                  keep_alive: float | None = None,
                  timeout: float = START_TIMEOUT) -> ServerInfo:
    """Return a running server for the embedded model, starting one if needed.

    Args:
        name: embedded model short name (default model if None).
        settings: how a server started here runs (default :data:`DEFAULT_SETTINGS`);
            a running server is reused as it is.
        keep_alive: seconds a server started here stays up after its last request,
            outliving this process; 0: it stops with this process.  None: the one of
            ``settings`` when given, else :func:`default_keep_alive` (``$RLM_KEEP_ALIVE``,
            else 300).
        timeout: seconds to wait for the server to become ready.

    Raises:
        LocalModelError: llama-cpp-python is not installed, the weights cannot be
            prepared, or the server exits or does not answer within ``timeout``.
        ValueError: ``$RLM_KEEP_ALIVE`` is not a number of seconds.
    """
    spec = get_spec(name)
    with _lock, start_lock(spec):
        running = _lookup(spec, clean=True)
        if running is not None:
            log.debug("reusing the %s server on port %d (pid %d)", spec.name, running.port,
                      running.pid)
            return running
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelError(
                "the embedded model needs llama-cpp-python: pip install 'rlm-kernel[local]'"
            )
        if keep_alive is None and settings is None:
            keep_alive = default_keep_alive()
        settings = settings or DEFAULT_SETTINGS
        if keep_alive is not None:
            settings = replace(settings, keep_alive=keep_alive)
        proc, info = _launch(spec, settings)
        log.info("starting the %s server on port %d (pid %d, %s)", spec.name, info.port,
                 info.pid, settings)
        _wait_until_ready(spec, proc, info, timeout)
        _servers[spec.name] = (proc, info)
        write_state(spec, info)
        return info


def _launch(spec: LocalModelSpec, settings: ServerSettings,
            log: Path | None = None) -> tuple[subprocess.Popen, ServerInfo]:
    """Prepare the weights and start the server process on a free port, its output
    to ``log`` (default: the model's server log)."""
    path = prepare(spec.name)
    port = free_port()
    cmd = server_command(path, spec.name, port, settings)
    log_file = (log or log_path(spec)).open("wb")
    # A session of its own: Ctrl-C or a kernel interrupt (sent to the process
    # group) must not kill the server mid-run.  Without keep_alive it still dies
    # with this process; with it, it outlives this process and stops itself.
    if settings.keep_alive <= 0:
        cmd = with_parent_death(cmd)
    try:
        proc = spawner.popen(cmd, stdout=log_file,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              start_new_session=True)
    finally:
        log_file.close()
    return proc, ServerInfo(model=spec.name, port=port, pid=proc.pid, n_ctx=settings.n_ctx,
                            keep_alive=settings.keep_alive)


def _wait_until_ready(spec: LocalModelSpec, proc: subprocess.Popen, info: ServerInfo,
                      timeout: float, log: Path | None = None) -> None:
    """Poll ``/v1/models`` until it answers (seconds: ``timeout``); ``log``: the
    server's log when not the model's own (a replica's), quoted in errors.

    Raises:
        LocalModelError: the process exited, or did not answer in time (it is killed).
    """
    deadline = time.monotonic() + timeout

    def tail() -> str:
        if log is None:
            return log_tail(spec)
        try:
            return " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        except OSError:
            return "no log"

    while not healthy(info, timeout=1.0):
        if proc.poll() is not None:
            raise LocalModelError(
                f"the model server exited with code {proc.returncode}: {tail()}"
            )
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise LocalModelError(
                f"the model server did not answer within {timeout:.0f} s: {tail()}"
            )
        time.sleep(0.25)


def replica_log_path(name: str | None, index: int) -> Path:
    """The log of replica ``index`` (from 1) of the embedded model ``name``: beside the
    model's own server log, ``server-<name>-replica<index>.log``."""
    spec = get_spec(name)
    return log_path(spec).with_name(f"server-{spec.name}-replica{index}.log")


def start_replicas(count: int, name: str | None = None, *,
                   settings: ServerSettings | None = None,
                   timeout: float = START_TIMEOUT) -> list[ServerInfo]:
    """Start ``count`` servers of the embedded model for a model fleet, all at once.

    Each listens on its own free 127.0.0.1 port and writes its own log
    (:func:`replica_log_path`); none is written to the state file, so the server
    ``rlm run`` finds and starts (:func:`ensure_server`) is unaffected.  They stop with
    :func:`stop_replicas`, at this process's exit, or when it dies (Linux).  Each
    serves one request at a time (llama.cpp's one slot).

    Args:
        count: how many servers (at least 1).
        name: embedded model short name (default model if None).
        settings: how each runs; default :data:`DEFAULT_SETTINGS` with the cores shared
            out (``threads`` = CPU cores // ``count``, at least 1).
        timeout: seconds to wait for them to become ready.

    Returns:
        The servers' :class:`ServerInfo`, in start order.

    Raises:
        ValueError: ``count`` is less than 1.
        LocalModelError: llama-cpp-python is not installed, the weights cannot be
            prepared, or a server exits or does not answer within ``timeout`` (then
            every one started here is stopped).
    """
    if count < 1:
        raise ValueError(f"replicas must be at least 1, got {count}")
    spec = get_spec(name)
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalModelError(
            "the embedded model needs llama-cpp-python: pip install 'rlm-kernel[local]'")
    if settings is None:
        settings = replace(DEFAULT_SETTINGS, threads=max(1, (os.cpu_count() or 2) // count))
    started: list[tuple[subprocess.Popen, ServerInfo, Path]] = []
    try:
        for index in range(1, count + 1):
            replica_log = replica_log_path(spec.name, index)
            proc, info = _launch(spec, settings, replica_log)
            started.append((proc, info, replica_log))
        for proc, info, replica_log in started:
            _wait_until_ready(spec, proc, info, timeout, replica_log)
    except BaseException:
        for proc, _, _ in started:
            _end(proc, grace=0)
        raise
    with _lock:
        _replicas.extend((proc, info) for proc, info, _ in started)
    log.info("%d replica(s) of %s (%s): %s", count, spec.name, settings,
             ", ".join(f"{info.api_base} (pid {info.pid})" for _, info, _ in started))
    return [info for _, info, _ in started]


def running_replicas() -> list[ServerInfo]:
    """The replicas this process started (:func:`start_replicas`) whose process runs."""
    with _lock:
        return [info for proc, info in _replicas if proc.poll() is None]


def stop_replicas(grace: float = 3.0) -> int:
    """Stop every replica this process started (:func:`start_replicas`); returns how
    many were running.

    Args:
        grace: seconds to wait after SIGTERM before SIGKILL.
    """
    with _lock:
        replicas = list(_replicas)
        _replicas.clear()
    alive = sum(proc.poll() is None for proc, _ in replicas)
    for proc, _ in replicas:
        _end(proc, grace)
    return alive


def _end(proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds; waits for the process."""
    _terminate(proc.pid, grace, running=lambda: proc.poll() is None)
    proc.wait()


def _terminate(pid: int, grace: float, running: Callable[[], bool]) -> None:
    """SIGTERM to ``pid``, then SIGKILL when ``running()`` still says so after ``grace``
    seconds (a server waits for a request in flight on SIGTERM).

    Raises:
        PermissionError: ``pid`` is another user's process.
    """
    if not running():
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    if running():
        os.kill(pid, signal.SIGKILL)


def how_it_ended(name: str | None = None) -> str | None:
    """How the server this process started for ``name`` ended, as one line for an
    error message (its exit code or signal, and the last lines of its log); None
    while it runs, or when this process did not start it.

    A native crash of llama.cpp (a build for the wrong CPU features, say) kills the
    server mid-request; the client then only sees a refused connection."""
    spec = get_spec(name)
    entry = _servers.get(spec.name)
    if entry is None or entry[0].poll() is None:
        return None
    code = entry[0].returncode
    try:
        how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"
    except ValueError:
        how = f"exit code {code}"
    return (f"the model server (pid {entry[1].pid}) died while answering ({how}); "
            f"its log {log_path(spec)} ends: {log_tail(spec)}")


def stop_server(name: str | None = None, grace: float = 3.0) -> bool:
    """Stop the server this process started for ``name``; True if one was stopped.

    Args:
        name: embedded model short name (default model if None).
        grace: seconds to wait after SIGTERM before SIGKILL (a server busy
            generating finishes its request first on SIGTERM).

    The state file is removed only if it still names this server: a server some
    other process started, and its state file, are left alone.
    """
    spec = get_spec(name)
    entry = _servers.pop(spec.name, None)
    if entry is None:
        return False
    proc, info = entry
    _end(proc, grace)
    with start_lock(spec, timeout=2.0):  # best effort when another process holds it
        remove_state(spec, info.pid)
    return True


def stop_running(name: str | None = None, grace: float = 3.0) -> ServerInfo | None:
    """Stop the running server of ``name``, whichever process started it (``rlm model
    stop``): SIGTERM, SIGKILL after ``grace`` seconds (a server waits for a request in
    flight on SIGTERM), then its state file is removed.  Returns the server stopped, or
    None when none ran.

    Raises:
        PermissionError: the server is another user's process.
    """
    spec = get_spec(name)
    info = find_running(spec.name)
    if info is None:
        return None
    if stop_server(spec.name, grace):
        return info
    _terminate(info.pid, grace, running=lambda: is_server(info.pid))
    with start_lock(spec, timeout=2.0):
        remove_state(spec, info.pid)
    return info


@atexit.register
def stop_all_servers() -> None:
    """Stop every model server this process started, replicas too (run at exit), but
    a server with a ``keep_alive``: it outlives this process and stops itself."""
    for name, (proc, info) in list(_servers.items()):
        if info.keep_alive > 0 and proc.poll() is None:
            log.debug("leaving the %s server (pid %d) up: it stops itself after %g idle "
                      "seconds", name, info.pid, info.keep_alive)
            continue
        stop_server(name)
    stop_replicas()


class LocalModelClient(LiteLLMClient):
    """A :class:`LiteLLMClient` for the embedded model, served on 127.0.0.1.

    litellm talks to llama-cpp-python's OpenAI-compatible server as
    ``openai/<alias>``.  The server is started (or found) at the first request
    and looked up again before each one, so a server that died is restarted.

    Every request is streamed, a sub-call's too (its pieces go nowhere): llama-cpp-python's
    server stops generating a streamed reply when its client goes (it looks after each
    token), but a plain one runs to its end, and a server that outlives this process
    (``keep_alive``) would go on generating for a client killed mid-request.

    Args:
        name: embedded model short name (see :data:`rlm_kernel.models.local.weights.MODELS`).
        keep_alive: seconds a server this client starts stays up after its last request
            (see :func:`ensure_server`); None: ``$RLM_KEEP_ALIVE``, else 300.
        **kwargs: as for :class:`LiteLLMClient` (``api_base``/``api_key`` are set here).
    """

    def __init__(self, name: str, keep_alive: float | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("num_retries", 1)
        super().__init__(f"openai/{name}", api_key="local", priced=False, **kwargs)
        self.local_name = name
        self.keep_alive = keep_alive
        self._context_window = DEFAULT_N_CTX
        spawner.start()  # now, not inside a step that first asks the model
        # the token counter of streamed replies (~0.7 s to load), before the first reply
        threading.Thread(target=self._token_counter, daemon=True,
                         name="rlm-token-counter").start()

    def _token_counter(self) -> None:
        spec = get_spec(self.local_name)
        if is_prepared(spec):  # else the first call prepares the weights, then loads it
            counter_for(weights_path(spec))

    def check(self) -> None:
        """Nothing to check before the run: the server starts on first use."""

    def complete(self, messages: list[Message], **kwargs: Any) -> Completion:
        """Start or find the server, then send ``messages`` (see :class:`LanguageModel`).

        A server that died during the request (killed, out of memory) is started
        again and the request sent once more; any other failure is raised.

        Raises:
            LLMError: the weights cannot be prepared, the server cannot start,
                or the request failed (the message names the cause).
        """
        if kwargs.get("stream") is None:  # streamed all the same (the class docstring)
            kwargs["stream"] = _unread
        self._serve()
        try:
            return super().complete(messages, **kwargs)
        except LLMError:
            if find_running(self.local_name) is not None:  # alive: the error is real
                raise
        self._serve()
        try:
            return super().complete(messages, **kwargs)
        except LLMError as exc:
            ended = how_it_ended(self.local_name)
            if ended is None:
                raise
            raise LLMError(f"{self.model}: {ended}") from exc

    def _serve(self) -> None:
        try:
            self.api_base = ensure_server(self.local_name, keep_alive=self.keep_alive).api_base
        except LocalModelError as exc:
            raise LLMError(f"embedded model: {exc}") from exc

    def read_stream(self, litellm: Any, response: Any, messages: list[Message],
                     stream: Callable[[str], None], call: LLMCall, start: float) -> Any:
        """A streamed reply (see :class:`LiteLLMClient`), its usage counted as the
        server counts it (:mod:`~rlm_kernel.models.local.tokens`): llama-cpp-python's
        server sends none with a stream."""
        built = super().read_stream(litellm, response, messages, stream, call, start)
        usage = getattr(built, "usage", None)
        counter = counter_for(weights_path(get_spec(self.local_name)))
        if usage is not None and counter is not None:
            prompt = counter.prompt(messages)
            if prompt is not None:
                usage.prompt_tokens = prompt
            usage.completion_tokens = counter.text(built.choices[0].message.content or "")
            usage.total_tokens = usage.prompt_tokens + usage.completion_tokens
        return built


def _unread(piece: str) -> None:
    """The pieces of a reply nobody watches (a sub-call's): dropped."""
