"""``%%rlm --isolated``: a task whose model code runs behind the process wall.

The kernel's point is the live namespace, so a task runs there by default.  With
``--isolated`` (or ``--executor isolated``, or ``c.RLM.executor = "isolated"``) its
steps run in an :class:`~rlm_kernel.executors.isolated.IsolatedExecutor` instead: the
named variables (``--context``, default every data variable) are copied into the child,
the user's tools are served from the kernel, and only the answer comes back (plus the
names given with ``--results``).

The notebook view is the one of an in-process step: each step's output reaches the
step renderer as it is written, each step takes the kernel's next execution count (and
its code is in ``In``), and an error of model code is an nbformat ``error`` output that
IPython formatted (colours, ``Cell In[n], line 2`` and the lines around it), made from
the frames the worker reports (:func:`~rlm_kernel.executors.worker.error_report`).
The model still reads the error as the text the worker wrote.
"""

from __future__ import annotations

import builtins
import linecache
import logging
import os
import re
import sys
import sysconfig
import time
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any

from ..engine.frontends import TRACEBACK_LINE
from ..executors import IsolatedExecutor, OutputCallback, Redactor, WorkerError, redact_output
from ..repl_types import REPLResult
from .shell_executor import LIVE_CUT

__all__ = ["IsolatedSteps", "TracebackHold", "copy_back", "error_output"]

log = logging.getLogger(__name__)

_STEP_FILE = "<rlm-step-"
_MAX_FRAMES = 60  # frames of a reported error shown (the worker sends no more)
_MAX_LINE = 100_000  # a frame's line number past this is shown as this
_MAX_SOURCE = 100_000  # characters of a step's code kept to show its lines
_HOLD_STARTS = (TRACEBACK_LINE, f'  File "{_STEP_FILE}')  # a traceback, a SyntaxError
_LINE_ENDS = re.compile(r"(?<=\n)")


class TracebackHold:
    """Holds back a step's stderr from the line that starts a traceback (or a
    ``SyntaxError`` of the step's code) on, so that the notebook can show the error as
    an ``error`` output instead of the same text twice.

    :meth:`feed` returns what can be shown now: everything before such a line (a line
    that could still become one is kept until it cannot); :attr:`held` is the text
    held back.  The error that ends a step is its last output; a traceback that model
    code printed and went on from (``traceback.print_exc()``) is shown as text once
    more output comes ``patience`` seconds after it (:meth:`stale` for other streams).

    Args:
        patience: seconds after the start of a held traceback from which more output
            means the step went on.
        clock: the time source (seconds).
    """

    def __init__(self, patience: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.held: str | None = None
        self.patience, self._clock, self._since = patience, clock, 0.0
        self._partial = ""  # the start of a line that may still become a traceback's
        self._mid_line = False  # the current line's start was shown already

    def stale(self) -> str:
        """The held text, to be shown now, when the step went on after it (more output
        came past the patience); else ``""``."""
        if self.held is None or self._clock() - self._since <= self.patience:
            return ""
        earlier, self.held = self.held, None
        self._mid_line = not earlier.endswith("\n")
        return earlier

    def feed(self, text: str) -> str:
        """Take a chunk of stderr; return the part to show now."""
        earlier = self.stale()
        if self.held is not None:
            self.held += text
            return ""
        shown: list[str] = [earlier]
        pieces = [p for p in _LINE_ENDS.split(text) if p]
        for i, piece in enumerate(pieces):
            if self._mid_line:
                shown.append(piece)
                self._mid_line = not piece.endswith("\n")
                continue
            line, self._partial = self._partial + piece, ""
            if line.startswith(_HOLD_STARTS):
                self.held, self._since = line + "".join(pieces[i + 1:]), self._clock()
                break
            if not line.endswith("\n") and any(s.startswith(line) for s in _HOLD_STARTS):
                self._partial = line
                continue
            shown.append(line)
            self._mid_line = not line.endswith("\n")
        return "".join(shown)

    def release(self) -> str:
        """All text not shown yet (held or a partial line), and forget it."""
        text = (self._partial or "") + (self.held or "")
        self._partial, self.held = "", None
        return text


class IsolatedSteps(IsolatedExecutor):
    """An :class:`IsolatedExecutor` whose steps look like in-process ones in the
    notebook: it hands each chunk of a step's output to the kernel's step renderer
    (``on_rich_output``, as :class:`~rlm_kernel.jupyter.shell_executor.ShellExecutor`
    does) as nbformat ``stream`` outputs, gives each step the shell's next execution
    count (:attr:`last_execution_count`; the step's code goes into ``In``), and shows
    an error of model code as an ``error`` output formatted by the shell's IPython.

    With no IPython shell running (a plain Python process) steps get no count and
    errors stay stderr text."""

    on_rich_output: Any = None
    take_counts: bool = True
    """Whether steps take the shell's execution counts (False in a stock shell:
    :func:`~rlm_kernel.jupyter.shell_executor.numbers_steps`; their tracebacks then name
    their code after the task cell)."""
    last_execution_count: int | None = None
    last_cut_streams: dict[str, str] = {}  # noqa: RUF012 - replaced, never mutated
    """``{stream name: kept text}`` of the last step's streams whose live text stopped at
    the cap (see :attr:`ShellExecutor.last_cut_streams
    <rlm_kernel.jupyter.shell_executor.ShellExecutor.last_cut_streams>`)."""

    def execute(self, code: str, *, timeout: float | None = None,
                on_output: OutputCallback | None = None) -> REPLResult:
        """Run ``code`` in the child (see :meth:`IsolatedExecutor.execute`)."""
        shell = _shell()
        self.last_execution_count = _take_count(shell, code) if self.take_counts else None
        # a traceback names a step's code "Cell In[n]" after its count; a step without one
        # after the running (task) cell, as IPython names an in-process step's code
        named = self.last_execution_count if self.take_counts or shell is None \
            else int(shell.execution_count) - 1
        if named is not None:
            self._step_counts = {**getattr(self, "_step_counts", {}), code: named}
        hold = TracebackHold()
        self.last_cut_streams = {}
        cut: set[str] = set()  # streams whose live text stopped at the cap

        def tee(name: str, text: str) -> None:
            if on_output is not None:
                on_output(name, text)
            if LIVE_CUT in text:
                cut.add(name)
            if name == "stderr" and shell is not None:
                text = hold.feed(text)
            elif shell is not None:  # the step went on after a traceback it printed?
                self._show({"output_type": "stream", "name": "stderr", "text": hold.stale()})
            self._show({"output_type": "stream", "name": name, "text": text})

        result = None
        try:
            result = super().execute(code, timeout=timeout, on_output=tee)
            self.last_cut_streams = {name: getattr(result, name) for name in sorted(cut)}
        finally:
            self._show_error(shell, hold, failed=result is not None and not result.success)
        return result

    def _show(self, output: dict[str, Any]) -> None:
        if self.on_rich_output is not None and (output.get("output_type") != "stream"
                                                or output.get("text")):
            self.on_rich_output(output)

    def _show_error(self, shell: Any, hold: TracebackHold, failed: bool) -> None:
        """Show what ``hold`` kept: the step's error as an ``error`` output when the
        worker reports it and its text is in what was held, else as the text."""
        held = hold.release()
        report = None
        if failed and shell is not None and held:
            try:
                reply = self.request("last_error")
                report = reply.get("report") if isinstance(reply.get("report"), dict) else None
            except WorkerError as exc:
                log.info("no error report from the isolated REPL: %s", exc)
        plain = report.get("plain") if report is not None else None
        redact = Redactor()
        at = held.rfind(redact(plain)) if isinstance(plain, str) and plain else -1
        if report is None or at < 0 or not isinstance(plain, str):
            self._show({"output_type": "stream", "name": "stderr", "text": held})
            return
        try:
            output = error_output(shell, report, getattr(self, "_step_counts", {}))
        except Exception:  # noqa: BLE001 - a report IPython cannot format: show the text
            log.warning("could not format an isolated step's error", exc_info=True)
            self._show({"output_type": "stream", "name": "stderr", "text": held})
            return
        after = at + len(redact(plain))
        self._show({"output_type": "stream", "name": "stderr", "text": held[:at]})
        self._show(redact_output(output, redact))
        self._show({"output_type": "stream", "name": "stderr", "text": held[after:]})


def _shell() -> Any:
    """The running IPython shell, or None."""
    if "IPython" not in sys.modules:
        return None
    from IPython import get_ipython

    return get_ipython()


def _take_count(shell: Any, code: str) -> int | None:
    """The shell's next execution count for a step, taken as ``run_cell`` takes one
    (``In[n]`` holds the code); None without a shell."""
    if shell is None:
        return None
    count = int(shell.execution_count)
    try:
        shell.history_manager.store_inputs(count, code, code)
    except Exception:  # noqa: BLE001 - history is bookkeeping: the count stands
        log.debug("step %s not stored in the history", count, exc_info=True)
    shell.execution_count = count + 1
    return count


# -- the error output ---------------------------------------------------------------------
class _Raised(Exception):
    """Raised by a made-up frame (see :func:`_frame`)."""


_PYTHON_DIRS = tuple(dict.fromkeys(
    os.path.join(os.path.realpath(p), "") for key in ("stdlib", "platstdlib", "purelib", "platlib")
    if (p := sysconfig.get_paths().get(key))))


def _readable_here(filename: str) -> bool:
    """True for a regular file of the Python installation, which the sandbox binds
    read-only at the same path: its lines on this side are the worker's.  Nothing
    else named by the worker is read here."""
    path = os.path.realpath(filename)
    return path.startswith(_PYTHON_DIRS) and path.endswith(".py") and os.path.isfile(path)


def _frame(filename: str, lineno: int, name: str) -> TracebackType:
    """A traceback entry of a frame at ``filename``:``lineno`` in function ``name``,
    made by running code compiled under that file name (how template engines show
    their templates' lines in Python tracebacks)."""
    line = min(max(int(lineno), 1), _MAX_LINE)  # the worker's number: bounded here
    code = compile("\n" * (line - 1) + "raise _rlm_raised_", filename, "exec")
    if sys.version_info >= (3, 11):
        code = code.replace(co_name=name, co_qualname=name)
    else:  # no qualified name of its own before 3.11
        code = code.replace(co_name=name)
    try:
        exec(code, {"__name__": "__rlm_isolated__", "_rlm_raised_": _Raised})
    except _Raised:
        tb = sys.exc_info()[2]
    assert tb is not None and tb.tb_next is not None
    return tb.tb_next


def _error_class(ename: str, module: str) -> type[BaseException]:
    """The exception class named ``ename``: the built-in one, else a class of that
    name (an ``Exception``)."""
    kind = getattr(builtins, ename, None) if module == "builtins" else None
    if isinstance(kind, type) and issubclass(kind, BaseException):
        return kind
    return type(ename or "Exception", (Exception,), {"__module__": module or "builtins"})


def error_output(shell: Any, report: dict[str, Any], step_counts: dict[str, int]
                 ) -> dict[str, Any]:
    """An nbformat ``error`` output of an isolated step's error, formatted by
    ``shell``'s IPython as it formats an in-process step's.

    Args:
        shell: the IPython shell (its ``InteractiveTB``, ``SyntaxTB`` and cell names).
        report: the worker's :func:`~rlm_kernel.executors.worker.error_report` (data
            model code may have forged: only strings and numbers are read from it).
        step_counts: ``{code: execution count}`` of this executor's steps; a frame in a
            step's code is labelled ``Cell In[count]`` as a notebook cell's is.

    Raises:
        Exception: a report IPython could not format (the caller shows the text).
    """
    said = report.get("sources")
    sources = said if isinstance(said, dict) else {}
    names: dict[str, str] = {}  # worker file -> the name it is shown under here
    filename_map = getattr(shell.compile, "_filename_map", None)
    added: list[str] = []

    def shown_as(filename: str) -> str:
        if filename in names:
            return names[filename]
        source = sources.get(filename)
        if isinstance(source, str) and filename.startswith(_STEP_FILE):
            source = source[:_MAX_SOURCE]
            key = f"<rlm-isolated-{uuid.uuid4().hex[:12]}>"
            linecache.cache[key] = (len(source), None, source.splitlines(True), key)
            added.append(key)
            count = step_counts.get(source)
            if count is not None and isinstance(filename_map, dict):
                filename_map[key] = count
        elif _readable_here(filename):
            key = filename
        else:
            key = f"<isolated REPL: {filename[:300]}>"
        names[filename] = key
        return key

    ename = str(report.get("ename", "Exception"))[:200]
    evalue = str(report.get("evalue", ""))[:20_000]
    etype = _error_class(ename, str(report.get("module", "builtins")))
    try:
        syntax = report.get("syntax")
        if isinstance(syntax, list) and len(syntax) == 7:
            fname, line, offset, text, end_line, end_offset, msg = syntax
            value: BaseException = SyntaxError(str(msg), (
                shown_as(str(fname)), int(line), int(offset), str(text),
                int(end_line) or None, int(end_offset) or None))
            stb = shell.SyntaxTB.structured_traceback(SyntaxError, value, [])
            etype = SyntaxError
        else:
            frames = [f for f in report.get("frames") or [] if isinstance(f, list) and len(f) == 3]
            frames = frames[:_MAX_FRAMES]
            entries = [_frame(shown_as(str(f)[:1000]), int(n), str(name)[:200])
                       for f, n, name in frames]
            for a, b in zip(entries, entries[1:], strict=False):
                a.tb_next = b
            try:
                value = etype(evalue)
            except Exception:  # noqa: BLE001 - a built-in type with other arguments
                etype = _error_class(ename, "")
                value = etype(evalue)
            stb = shell.InteractiveTB.structured_traceback(
                etype, value, entries[0] if entries else None, tb_offset=0)
    finally:
        for key in added:
            linecache.cache.pop(key, None)
            if isinstance(filename_map, dict):
                filename_map.pop(key, None)
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": list(stb)}


def copy_back(executor: IsolatedExecutor, names: list[str], user_ns: dict[str, Any]) -> list[str]:
    """Copy ``names`` from the child's namespace into the kernel's; returns the names the
    child did not have.  A value that is not plain data arrives as its
    :class:`~rlm_kernel.executors.isolated.RemoteValue` (a guarded ``repr``)."""
    missing = []
    for name in names:
        try:
            user_ns[name] = executor.namespace[name]
        except KeyError:
            missing.append(name)
    return missing
