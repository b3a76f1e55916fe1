"""A command run by the host for model code, with a hard time limit and bounded output:
what ``grep``, ``bash`` and ``run_tests`` of a working folder start
(:mod:`~rlm_kernel.executors.workfolder`, :mod:`~rlm_kernel.executors.test_runs`).

The command runs in a new session (its own process group) with no input and the
environment cut to the allow-list (:func:`~rlm_kernel.executors.environment.model_code_environ`);
past the limit, or when it has ended but processes it left keep its output open, the
group gets ``SIGTERM`` and then ``SIGKILL``: nothing it started runs when
:func:`run_command` returns.
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ..text import PRINT_LESS, HeadTail
from .environment import model_code_environ

__all__ = ["CommandResult", "run_command", "signal_name", "DEFAULT_KILL_GRACE",
           "DEFAULT_OUTPUT_CHARS", "LINGER_SECONDS"]

DEFAULT_OUTPUT_CHARS = 3000
"""Characters of a helper's result shown before the middle is cut."""
DEFAULT_KILL_GRACE = 2.0
"""Seconds between ``SIGTERM`` and ``SIGKILL`` to a command's process group."""
LINGER_SECONDS = 0.3
"""Seconds a command's output pipe may stay open after the command ended (processes it
left in the background) before they are stopped."""
_READ_CHUNK = 1 << 16


@dataclass
class CommandResult:
    """What :func:`run_command` gives back.

    Attributes:
        output: stdout and stderr interleaved, decoded (UTF-8, bad bytes replaced) and
            clipped; exit_code: the command's status (negative: killed by that signal);
        timed_out: the time limit stopped it; seconds: wall time; cut: characters of
            output not kept.
    """

    output: str
    exit_code: int | None
    timed_out: bool
    seconds: float
    cut: int


def _exited(pid: int) -> bool:
    """Whether ``pid`` (our child) has ended, without reaping it: its zombie keeps the
    process-group id from being reused until the group is killed."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_command(argv: list[str], *, cwd: str, timeout: float, max_chars: int,
                kill_grace: float = DEFAULT_KILL_GRACE,
                hint: str = PRINT_LESS, pass_env: Iterable[str] = ()) -> CommandResult:
    """Run ``argv`` in a new session with a hard time limit and bounded output.

    The command's process group gets ``SIGTERM`` when ``timeout`` seconds have passed
    (or when the command has ended but processes it started keep its output open for
    :data:`LINGER_SECONDS`), and ``SIGKILL`` ``kill_grace`` seconds later; the group is
    always sent ``SIGKILL`` before this returns, and on any exception (a step's own
    time limit, an interrupt) as well.

    Args:
        argv: the program and its arguments (no shell unless ``argv`` names one).
        cwd: its working folder.
        timeout: seconds before it is stopped.
        max_chars: characters of output kept (head and tail, as
            :func:`rlm_kernel.text.middle_cut` keeps them; the rest is counted).
        kill_grace: seconds between ``SIGTERM`` and ``SIGKILL``.
        hint: what the truncation note tells the reader to do.
        pass_env: names of the variables the command gets beyond the allow-list of
            :func:`~rlm_kernel.executors.environment.model_code_environ` (the
            ``pass_env`` setting; ``RLM_PASS_ENV`` names more).

    Raises:
        FileNotFoundError: the program does not exist.
    """
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env=model_code_environ(pass_env), close_fds=True)
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    os.set_blocking(out, False)
    kept = HeadTail(max_chars)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    sel = selectors.DefaultSelector()
    sel.register(out, selectors.EVENT_READ)
    pidfd = None
    if hasattr(os, "pidfd_open"):
        try:
            pidfd = os.pidfd_open(proc.pid)
            sel.register(pidfd, selectors.EVENT_READ)
        except OSError:
            pidfd = None
    deadline = start + timeout
    timed_out = exited = eof = False
    ended_at: float | None = None
    stop_at: float | None = None  # SIGTERM sent: SIGKILL at this time
    try:
        while not (exited and eof):
            now = time.monotonic()
            if stop_at is None and now >= deadline:
                timed_out = True
            if stop_at is None and (timed_out or (ended_at is not None
                                                  and now - ended_at >= LINGER_SECONDS)):
                _killpg(proc.pid, signal.SIGTERM)
                stop_at = now + kill_grace
            if stop_at is not None and now >= stop_at:
                break
            wait = min(0.05 if pidfd is None else 0.25,
                       (stop_at if stop_at is not None else deadline) - now)
            for key, _ in sel.select(max(wait, 0)):
                if key.fd == out:
                    try:
                        chunk = os.read(out, _READ_CHUNK)
                    except BlockingIOError:
                        continue
                    if chunk:
                        kept.add(decoder.decode(chunk))
                    else:
                        eof = True
                        sel.unregister(out)
                elif key.fd == pidfd:
                    sel.unregister(pidfd)
                    exited = True
            if not exited and pidfd is None:
                exited = _exited(proc.pid)
            if exited and ended_at is None:
                ended_at = time.monotonic()
    finally:
        _killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group
        proc.wait()
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
        proc.stdout.close()
    kept.add(decoder.decode(b"", final=True))
    return CommandResult(output=kept.text(hint), exit_code=proc.returncode,
                         timed_out=timed_out, seconds=time.monotonic() - start, cut=kept.cut)

def signal_name(number: int) -> str:
    """The name of signal ``number`` (``SIGKILL``), or ``signal N`` for a number that
    names none here."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
