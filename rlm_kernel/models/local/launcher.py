"""Starting llama-cpp-python's server process: its command line, a free port, and a
launcher that makes Linux kill the server with the process that started it
(``PR_SET_PDEATHSIG`` = SIGKILL), whichever thread asked for it.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_N_CTX", "ServerSettings", "free_port", "server_command", "spawner", "with_parent_death"]

DEFAULT_N_CTX = 8192  # tokens; llama.cpp's own default (2048) is too small for RLM prompts


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class ServerSettings:
    """How llama-cpp-python's server runs the embedded model.

    Attributes:
        n_ctx: context window in tokens.
        threads: CPU threads for generation and prompt processing (None: all cores;
            llama.cpp would use half).
        draft_tokens: prompt-lookup speculative decoding: tokens proposed per draft
            from n-grams of the prompt (llama-cpp-python's
            ``LlamaPromptLookupDecoding``, after Saxena's "prompt lookup decoding");
            None: off.  Replies at temperature 0 are the model's own either way.
        prompt_cache_bytes: llama-cpp-python's RAM prompt cache (``--cache``): the
            state after each request is kept and the longest cached prefix restored,
            so a root step after a sub-call need not evaluate its prompt again; None:
            off (only the previous request's prefix is reused).
        verbose: the server logs each request's reused prefix and timings.
        keep_alive: seconds the server stays up after its last request, outliving the
            process that started it (:mod:`~rlm_kernel.models.local.keep_alive`); 0: it
            stops with that process (and Linux kills it if that process dies).
    """

    n_ctx: int = DEFAULT_N_CTX
    threads: int | None = None
    draft_tokens: int | None = None
    prompt_cache_bytes: int | None = None
    verbose: bool = False
    keep_alive: float = 0.0


def server_command(model_path: Path, alias: str, port: int,
                   settings: ServerSettings | None = None) -> list[str]:
    """The command that runs llama-cpp-python's server for the embedded model, through
    :func:`rlm_kernel.models.local.serve.main` (which keeps a llama.cpp built with AMX
    kernels from crashing); the options follow the program name ``llama_cpp.server``.

    Args:
        model_path: the GGUF weights file.
        alias: the model name clients send (``openai/<alias>`` for litellm).
        port: TCP port on 127.0.0.1.
        settings: how the server runs (default :class:`ServerSettings`).

    ``--logits_all False``: llama-cpp-python's server keeps the logits of every
    position by default, an n_ctx x vocabulary float array (8,192 x 151,936 x 4
    bytes, about 5 GB for Qwen2.5); replies need the last position's only (which
    llama.cpp's sampler reads itself), and requests for ``logprobs`` fail without it.
    ``bench/bench_memory.py`` measures both and checks replies at temperature 0
    are the same.  Speculative decoding needs it on (llama-cpp-python samples at every
    drafted position and sizes its logits array by this flag).

    ``--interrupt_requests False``: by default the server ends a streamed reply (with
    its ``[DONE]``, as if complete) whenever another request waits for the model; the
    processes sharing one server (a batch's workers, a kernel and a command) would get
    each other's replies cut short.  A streamed request still ends when its client
    closes it (the server checks after each token), which is how a stop stops it.
    """
    s = settings or ServerSettings()
    threads = s.threads or os.cpu_count() or 2
    cmd = [sys.executable, "-c", _SERVE, "llama_cpp.server", "--model", str(model_path),
           "--model_alias", alias, "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", str(s.n_ctx), "--n_threads", str(threads),
           "--n_threads_batch", str(threads), "--verbose", str(s.verbose),
           "--logits_all", str(bool(s.draft_tokens)), "--interrupt_requests", "False",
           "--keep_alive", f"{s.keep_alive:g}"]
    if s.draft_tokens:
        cmd += ["--draft_model", "prompt-lookup-decoding",
                "--draft_model_num_pred_tokens", str(s.draft_tokens)]
    if s.prompt_cache_bytes:
        cmd += ["--cache", "True", "--cache_type", "ram",
                "--cache_size", str(s.prompt_cache_bytes)]
    return cmd


# The server process: llama-cpp-python's server behind rlm-kernel's guard for llama.cpp
# builds with AMX kernels (serve.py says why); the program name stays on the command line.
_SERVE = "from rlm_kernel.models.local.serve import main; main()"


# Run by the child's own interpreter, then replaced by the server (``execv`` keeps
# the setting): ask Linux to SIGKILL it when its parent dies (``prctl``
# PR_SET_PDEATHSIG = 1, from <linux/prctl.h>), and stop if the parent died already.
# SIGKILL, not SIGTERM: uvicorn waits for an in-flight generation on SIGTERM, which
# kept orphans generating for minutes; the server holds nothing worth saving.
_PARENT_DEATH = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    sys.exit('rlm-kernel: the process that started the server is gone')\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[2:]])\n"
)


def with_parent_death(cmd: list[str]) -> list[str]:
    """``cmd`` (a ``sys.executable`` command) wrapped so that its process is killed
    with the one starting it (Linux); unchanged elsewhere."""
    if not sys.platform.startswith("linux"):
        return cmd
    return [sys.executable, "-c", _PARENT_DEATH, str(os.getpid()), *cmd[1:]]


class _Spawner:
    """Starts child processes from one thread that lives as long as the process.

    Linux sends the parent-death signal when the *thread* that forked the child
    ends, not the process: a server started from a worker thread (a batched
    sub-call's pool) would be killed when the pool shuts down.  This thread never
    ends before the process does (a daemon thread; a forked child starts its own).
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._guard = threading.Lock()

    def start(self) -> None:
        """Start the thread if it does not run (idempotent).  Started before a run's
        steps (when a local model's client is made), it is not one of the threads a
        step leaves running, whose output the executors mute."""
        with self._guard:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name="rlm-server-spawner")
                self._thread.start()

    def popen(self, cmd: list[str], **kwargs: Any) -> subprocess.Popen:
        """``subprocess.Popen(cmd, **kwargs)``, run on the spawner thread.

        Raises:
            OSError: the program cannot be started (as ``Popen`` raises it).
        """
        self.start()
        done: Future[subprocess.Popen] = Future()
        self._jobs.put((cmd, kwargs, done))
        return done.result()

    def _serve(self) -> None:
        while True:
            cmd, kwargs, done = self._jobs.get()
            try:
                done.set_result(subprocess.Popen(cmd, **kwargs))
            except BaseException as exc:  # handed to the caller
                done.set_exception(exc)


spawner = _Spawner()
"""The process's one :class:`_Spawner`: every server is started from its thread."""
