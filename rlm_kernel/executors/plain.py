"""Executors run model code in a persistent namespace and report a REPLResult.

The engine only knows the :class:`Executor` protocol.  :class:`PlainExecutor`
runs code with ``exec`` in a dict, shows the value of a trailing expression
the way IPython does, captures stdout and stderr (and can stream them to a
callback as they are written), turns ``FINAL``/``FINAL_VAR`` into
``REPLResult.final_output``, and applies the per-step time limit.  The IPython
executor that runs code through a kernel's shell lives beside the kernel.
"""

from __future__ import annotations

import ast
import io
import linecache
import os
import threading
import time
from collections.abc import Iterator, MutableMapping
from contextlib import (
    AbstractContextManager,
    contextmanager,
    nullcontext,
    redirect_stderr,
    redirect_stdout,
)
from typing import Any, Protocol, TextIO

from ..repl_types import REPLResult
from ..termination import FinalOutput
from .host_state import StepScope, step_scope
from .reads import instrument, recording
from .redaction import Redactor
from .streams import MAX_KEPT_CHARS, OutputCallback, StreamTee
from .thread_output import filter_streams
from .timeouts import StepTimeout, time_limit, timeout_message
from .tracebacks import format_model_traceback

__all__ = ["Executor", "PlainExecutor", "OutputCallback", "StreamTee", "combined_output"]

TextStream = TextIO | io.TextIOBase
"""A text stream a step writes to: the standard streams, or a
:class:`~rlm_kernel.executors.streams.StreamTee` (an :class:`io.TextIOBase`, which
typeshed's nominal ``TextIO`` does not include)."""

ReadWatch = tuple[frozenset[str], frozenset[str]]
"""``(names, attributes)`` whose executed reads a step records
(:mod:`~rlm_kernel.executors.reads`)."""

class Executor(Protocol):
    """Runs one code block at a time in a namespace that persists between calls.

    What callers read besides :meth:`execute`: :attr:`in_process` (whether model code
    shares the caller's process: the engine lends the user's tools as copies then, and
    a child run of ``rlm_query`` gets an executor of the same kind) and :meth:`close`
    (release what the executor holds, a worker process; idempotent)."""

    @property
    def namespace(self) -> MutableMapping[str, Any]:
        """The variables model code sees, by name; they persist between steps (behind
        the process wall, a proxy of the worker's)."""
        ...

    @property
    def in_process(self) -> bool:
        """True when model code runs in the caller's process (``exec``, an IPython
        shell); False when it runs behind the process wall (a sandboxed worker)."""
        ...

    def close(self) -> None:
        """Release what the executor holds (a worker process, its sandbox); idempotent.
        An in-process executor holds nothing."""
        ...

    def execute(self, code: str, *, timeout: float | None = None,
                on_output: OutputCallback | None = None) -> REPLResult:
        """Run ``code``; never raise for errors in the code itself.

        Args:
            code: Python source of one step.
            timeout: seconds before the step is stopped (None = no limit).
            on_output: called with each chunk of stdout/stderr as it is written.

        Returns:
            A :class:`REPLResult`; ``success`` is False when the code raised or
            timed out, ``final_output`` is set when it called ``FINAL``/``FINAL_VAR``.

        Raises:
            KeyboardInterrupt: the user interrupted; the engine stops the run.
        """
        ...


def _compile_cell(code: str, filename: str,
                  watch: ReadWatch | None = None) -> tuple[Any, Any]:
    """Compile ``code`` as a body plus, if it ends in an expression, that expression;
    with ``watch`` (``(names, attributes)``), its reads of them recorded when they run
    (:func:`~rlm_kernel.executors.reads.instrument`)."""
    tree = ast.parse(code, filename=filename, mode="exec")
    if watch is not None:
        tree = instrument(tree, *watch)
    last = None
    if tree.body and isinstance(tail := tree.body[-1], ast.Expr):
        tree.body.pop()
        last = ast.Expression(tail.value)
    # dont_inherit: model code gets no future statement of this module's
    # (``annotations`` would make a model's @dataclass look its types up in a module
    # that is not in sys.modules, and fail)
    body = compile(tree, filename, "exec", dont_inherit=True)
    expr = compile(last, filename, "eval", dont_inherit=True) if last is not None else None
    return body, expr


_STEP_TURN = threading.RLock()
"""Held by an in-process step: a step swaps the process's ``sys.stdout``/``sys.stderr``
for its own streams (``contextlib.redirect_stdout``), and two threads swapping them at
once leave one step's stream in place for good (every later print of the process lost),
so the steps of runs in several threads of one process (a thread pool, ``RLM.map`` on
one, a Dask worker with several threads) take turns; between steps (root-model calls)
those runs go on together.  Re-entrant: a child run's steps (``rlm_query``) run inside
their parent's step, in its thread."""


class PlainExecutor:
    """Run model code with ``exec`` in a plain dict.

    Args:
        namespace: the globals of the REPL; a new dict if None.
        show_last_expr: print the ``repr`` of a trailing expression that is not
            None (IPython's ``last_expr`` behaviour) and bind it to ``_``.
        max_output_chars: characters of each stream of a step that are kept and
            shown live (see :mod:`rlm_kernel.executors.streams`).
        workdir: the current folder of each step (the caller's is restored after
            it); None: the caller's.  Nothing stops in-process code from writing
            elsewhere: the isolated executor walls the folder.
    """

    in_process = True
    """Model code runs in this process (:attr:`Executor.in_process`)."""

    def __init__(self, namespace: dict[str, Any] | None = None,
                 *, show_last_expr: bool = True,
                 max_output_chars: int = MAX_KEPT_CHARS,
                 workdir: str | os.PathLike[str] | None = None) -> None:
        self.max_output_chars = max_output_chars
        self.workdir = os.fspath(workdir) if workdir is not None else None
        self.namespace: dict[str, Any] = namespace if namespace is not None else {}
        self.namespace.setdefault("__name__", "__rlm__")
        self.namespace.setdefault("__builtins__", __builtins__)
        self.show_last_expr = show_last_expr
        self._cells = 0
        self.read_watch: ReadWatch | None = None
        """The names (and attribute names) whose reads each step records in
        ``REPLResult.names_read``; None: no record (``names_read`` None)."""
        self.last_reads: frozenset[str] | None = None

    def close(self) -> None:
        """Nothing to release: the namespace is the caller's (:meth:`Executor.close`)."""

    def execute(self, code: str, *, timeout: float | None = None,
                on_output: OutputCallback | None = None) -> REPLResult:
        """Run ``code``; see :meth:`Executor.execute`."""
        redact = Redactor()
        out = StreamTee("stdout", on_output, max_chars=self.max_output_chars, redact=redact)
        err = StreamTee("stderr", on_output, max_chars=self.max_output_chars, redact=redact)
        start = time.perf_counter()
        home = os.getcwd() if self.workdir is not None else None
        try:
            if self.workdir is not None:  # the step's folder; the step scope keeps it so
                os.chdir(self.workdir)
            with self.step_context(code, out, err) as (filename, scope):
                final_output, success = self._run_limited(code, filename, timeout, err, scope)
        finally:  # the live view gets what is pending, even on an interrupt
            if home is not None:
                os.chdir(home)
            out.flush()
            err.flush()
        filter_streams()  # the host's streams are back: mute threads the step left running
        if scope.notes():
            err.write(scope.notes())
            err.flush()
        return REPLResult(
            stdout=out.getvalue(),
            stderr=err.getvalue(),
            locals=self.namespace,  # a reference, not a copy: cheap for big values
            execution_time=time.perf_counter() - start,
            llm_calls=[],
            success=success,
            final_output=final_output,
            names_read=self.last_reads,
        )

    @contextmanager
    def step_context(self, code: str, out: TextStream, err: TextStream,
                     ) -> Iterator[tuple[str, StepScope]]:
        """The frame of the next step, shared by this executor and the isolated
        executor's worker (which writes to its pipes): ``code`` is registered with
        :mod:`linecache` as ``<rlm-step-N>`` (tracebacks show its lines), ``out`` and
        ``err`` are ``sys.stdout`` and ``sys.stderr``, and a :func:`step_scope` puts the
        process state back after it.  A context manager, not a function that runs the
        step: model code's stack is as deep as it always was (a step that lowers
        ``sys.setrecursionlimit`` still gets its error reported).

        Yields:
            ``(the step's file name, its scope)``; run the step with
            :meth:`_run_limited` inside, and write ``scope.notes()`` (what the step left
            behind) after it where the caller wants them.
        """
        self._cells += 1
        filename = f"<rlm-step-{self._cells}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        with _STEP_TURN, redirect_stdout(out), redirect_stderr(err), \
                step_scope(out, err, namespace=self.namespace) as scope:
            yield filename, scope

    def _run_limited(self, code: str, filename: str, timeout: float | None,
                     err: TextStream, scope: StepScope | None = None,
                     ) -> tuple[dict[str, Any] | None, bool]:
        """Run the step under its time limit; (FINAL output or None, success).

        Args:
            scope: the step's :func:`step_scope`, which tells the user's interrupt
                from model code's; None: every ``KeyboardInterrupt`` is the user's.

        Raises:
            KeyboardInterrupt: the user interrupted the step (``SIGINT``); one that
                model code raises itself is a model error, written to ``err``.
        """
        try:
            with time_limit(timeout) as limit:
                final_output, success = self._run_code(code, filename, err, scope)
            if limit.cut_short(final_output):
                err.write("\n" + timeout_message(timeout))
                success = False
            return final_output, success
        except StepTimeout:
            err.write(timeout_message(timeout))
        except SystemExit as exc:
            err.write(f"SystemExit({exc.code!r}) ignored: model code may not exit the REPL\n")
        return None, False

    def _run_code(self, code: str, filename: str, err: TextStream,
                  scope: StepScope | None = None) -> tuple[dict[str, Any] | None, bool]:
        """Compile and run the step; errors in model code are written to ``err``
        (a ``KeyboardInterrupt`` too, unless the user sent it: ``scope.user_interrupt``)."""
        watch = self.read_watch
        self.last_reads = None
        with recording(self.namespace, watch) as recorder:
            try:
                try:
                    body, expr = _compile_cell(code, filename, watch)
                except (StepTimeout, SystemExit, KeyboardInterrupt):
                    raise
                except BaseException as exc:  # a SyntaxError: nothing ran
                    self._report_error(exc, filename, err)
                    return None, False
                return self._exec(body, expr, filename, err, scope)
            finally:
                if recorder is not None:
                    self.last_reads = frozenset(recorder.read)

    def _exec(self, body: Any, expr: Any, filename: str, err: TextStream,
              scope: StepScope | None) -> tuple[dict[str, Any] | None, bool]:
        """Run the compiled step (:meth:`_run_code`)."""
        try:
            exec(body, self.namespace)
            if expr is not None and self.show_last_expr:
                value = eval(expr, self.namespace)
                if value is not None:
                    self.namespace["_"] = value
                    text = repr(value)  # model code's own method, at its limits
                    with _host_frames(scope):
                        print(text)
        except FinalOutput as fin:
            return fin.output, True
        except KeyboardInterrupt as exc:
            if scope is None or scope.user_interrupt:
                raise
            with _host_frames(scope):
                self._report_error(exc, filename, err)
            return None, False
        except (StepTimeout, SystemExit):
            raise
        except BaseException as exc:  # model code errors go back to the model
            with _host_frames(scope):
                self._report_error(exc, filename, err)
            return None, False
        return None, True

    def _report_error(self, exc: BaseException, filename: str, err: TextStream) -> None:
        """Write an error of model code to ``err``: its traceback from the step's first
        frame to the model's own line (:mod:`~rlm_kernel.executors.tracebacks`)."""
        err.write(format_model_traceback(exc, filename))


def _host_frames(scope: StepScope | None) -> AbstractContextManager[None]:
    """:meth:`StepScope.host_frames` of ``scope``; nothing without one."""
    return scope.host_frames() if scope is not None else nullcontext()


def combined_output(result: REPLResult) -> str:
    """stdout followed by stderr of a result, for the model's view of a step."""
    if result.stderr and result.stdout:
        sep = "" if result.stdout.endswith("\n") else "\n"
        return f"{result.stdout}{sep}{result.stderr}"
    return result.stdout or result.stderr

