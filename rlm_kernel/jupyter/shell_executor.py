"""Run model code through an IPython shell: magics, rich display, execution counts.

:class:`ShellExecutor` implements the engine's ``Executor`` protocol with
``shell.run_cell``, so a step behaves like a notebook cell (it gets an
execution count and goes into ``In``/history).  Every output the step makes
(stream text, ``display()``, the value of a last expression, an error) is
captured as an nbformat output dict and handed to ``on_rich_output``; the
frontend layer decides where it is shown (a step cell, or an inline block in
the task cell).  The model is shown the text form of the same outputs, except a
stream that printed more than the cap: live it stops with a note, in the step's
record (the model's view, the trajectory) it is the head, the one marker and the
tail, as every executor keeps it (:meth:`StepCapture.keep_cut_streams`).
"""

from __future__ import annotations

import re
import sys
import time
import types
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from ..executors import (
    OutputCallback,
    ReadInstrumenter,
    ReadWatch,
    Redactor,
    StepTimeout,
    StreamTee,
    filter_streams,
    recording,
    redact_output,
    step_scope,
    time_limit,
    timeout_message,
    trim_exception,
    trim_traceback,
)
from ..repl_types import REPLResult
from ..termination import FinalOutput
from ..text import middle_cut

__all__ = ["RichOutputCallback", "ShellExecutor", "StepCapture", "display_output",
           "numbers_steps", "output_text", "record_cut_streams", "stock_shell_hooks",
           "LIVE_CUT"]

RichOutputCallback = Callable[[dict[str, Any]], None]
MAX_OUTPUTS = 500
"""Outputs (stream chunks, displays, results) of one step kept and shown; beyond it
they are counted in one note.  Streams are coalesced first (:mod:`rlm_kernel.executors.streams`)."""
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def output_text(output: dict[str, Any]) -> str:
    """The plain-text form of one nbformat output dict, as the model sees it."""
    kind = output.get("output_type")
    if kind == "stream":
        return output.get("text", "")
    if kind in ("execute_result", "display_data"):
        text = output.get("data", {}).get("text/plain", "")
        return text + "\n" if text and not text.endswith("\n") else text
    if kind == "error":
        return _ANSI.sub("", "\n".join(output.get("traceback", []))) + "\n"
    return ""


class _CapturingPublisher:
    """Stands in for ``shell.display_pub`` during a step of a stock shell."""

    def __init__(self, sink: RichOutputCallback) -> None:
        self._sink = sink
        self.is_publishing = False

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False,
                **kwargs):
        self._sink(display_output(data, metadata, transient))

    def clear_output(self, wait: bool = False) -> None:
        self._sink({"output_type": "clear_output", "wait": wait})


def display_output(data: dict[str, Any], metadata: dict[str, Any] | None = None,
                   transient: dict[str, Any] | None = None) -> dict[str, Any]:
    """One ``display()`` call of a step as an nbformat ``display_data`` output dict."""
    return {"output_type": "display_data", "data": dict(data),
            "metadata": dict(metadata or {}), **({"transient": transient} if transient else {})}


class StepCapture:
    """What one step makes, caught as nbformat output dicts, and how it ended.

    Its methods are what the shell does with a step's output while the step runs:
    stream writes, ``display()``, the display hook of a trailing expression,
    tracebacks (trimmed to the model's frames), ``exit()`` refused, and the
    custom-exception handler for ``FINAL`` and time-outs.  A shell that knows steps
    (:class:`~rlm_kernel.jupyter.kernel.RLMShell`, through its ``step_in_progress``)
    calls them from its own methods; any other shell has its hooks swapped for them
    for the step (:func:`stock_shell_hooks`).

    Args:
        shell: the IPython shell the step runs in.
        on_rich_output: called with each kept output dict (already redacted).
        on_output: called with each ``(stream name, text)`` chunk.
        counted: whether the step takes the shell's next execution count (else its
            result has no count and no ``Out`` entry: :func:`numbers_steps`).
    """

    def __init__(self, shell: Any, on_rich_output: RichOutputCallback | None,
                 on_output: OutputCallback | None, counted: bool = True) -> None:
        self.shell = shell
        self.on_rich_output = on_rich_output
        self.on_output = on_output
        self.outputs: list[dict[str, Any]] = []
        self.final: dict[str, Any] | None = None  # FinalOutput.output of the step
        self.timeout = False  # the time limit stopped the step
        self.error = False  # a traceback was shown, or the step timed out
        self.dropped = 0  # outputs beyond MAX_OUTPUTS
        self.redact = Redactor()
        self.count: int | None = shell.execution_count if counted else None
        """The step's execution count (None: the step takes none)."""
        self.user_interrupt = False  # the user's SIGINT arrived during the step
        self.forwarding = False  # on_rich_output runs: what it publishes is not the step's
        self.tees: list[StreamTee] = []  # the step's stdout and stderr (see keep_cut_streams)

    def sink(self, output: dict[str, Any]) -> None:
        """Keep (capped, redacted) and pass on one output; count it past
        :data:`MAX_OUTPUTS`.  The texts of a result, a display or an error are capped
        as a stream's are (:func:`~rlm_kernel.text.middle_cut`)."""
        if len(self.outputs) >= MAX_OUTPUTS:
            self.dropped += 1
            return
        output = redact_output(_capped(output), self.redact)
        self.outputs.append(output)
        if self.on_rich_output is not None:
            self.forwarding = True
            try:
                self.on_rich_output(output)
            finally:
                self.forwarding = False

    def stream(self, name: str, text: str) -> None:
        """A chunk of ``stdout``/``stderr`` text."""
        self.sink({"output_type": "stream", "name": name, "text": text})
        if self.on_output is not None:
            self.on_output(name, text)

    def displayhook(self, value: Any) -> None:
        """The value of a trailing expression: ``_`` and an ``execute_result`` (and
        ``Out[n]``, ``_n`` when the step has a count)."""
        if value is None:
            return
        shell = self.shell
        try:
            if self.count is None:  # no count: no Out entry (it would be another cell's)
                shell.user_ns["_"] = value
            else:
                shell.displayhook.update_user_ns(value)
        except Exception:  # noqa: BLE001 - history bookkeeping must not fail a step
            shell.user_ns["_"] = value
        data, md = shell.display_formatter.format(value)
        self.sink({"output_type": "execute_result", "data": data, "metadata": md,
                   "execution_count": self.count})

    def custom_exc(self, _shell: Any, etype: Any, value: BaseException, tb: Any,
                   tb_offset: Any = None) -> None:
        """The shell's handler for :class:`FinalOutput` and :class:`StepTimeout`."""
        if isinstance(value, FinalOutput):
            self.final = value.output
        else:
            self.timeout = True

    def showtraceback(self, etype: Any, evalue: BaseException, stb: list[str]) -> None:
        """An error in the step's code: an nbformat ``error`` output."""
        self.error = True
        self.sink({"output_type": "error", "ename": getattr(etype, "__name__", str(etype)),
                   "evalue": str(evalue), "traceback": list(stb)})

    def exc_info(self, etype: Any, value: Any, tb: Any) -> tuple[Any, Any, Any]:
        """An exception of the step's code, its traceback ending at the model's line
        that called into the framework (a helper, ``llm_query`` ...:
        :func:`~rlm_kernel.executors.tracebacks.trim_exception`)."""
        if isinstance(value, BaseException) and value.__traceback__ is tb:
            trim_exception(value)
        else:
            trim_traceback(tb)
        return etype, value, tb

    def refuse_exit(self, *args: Any, **kwargs: Any) -> None:
        """``exit()``/``quit()`` in model code: refused before the shell's ``ask_exit``
        runs, whose ``exit_now`` observer would stop the kernel's loop 0.1 s later
        whatever is reset afterwards.

        Raises:
            SystemExit: always (shown in the step's output)."""
        raise SystemExit("exit() ignored: model code may not stop the kernel")

    def hooks(self, stack: ExitStack) -> Any:
        """Route the step's streams, displays and errors here until ``stack`` closes;
        returns the step's host-state scope (:func:`step_scope`)."""
        out = StreamTee("stdout", self.stream, redact=self.redact)
        err = StreamTee("stderr", self.stream, redact=self.redact)
        self.tees = [out, err]
        stack.callback(err.flush)
        stack.callback(out.flush)
        stack.enter_context(_swap(sys, "stdout", out))
        stack.enter_context(_swap(sys, "stderr", err))
        scope = stack.enter_context(step_scope(out, err, namespace=self.shell.user_ns))
        step_in_progress = getattr(self.shell, "step_in_progress", None)
        stack.enter_context(step_in_progress(self) if step_in_progress is not None
                            else stock_shell_hooks(self.shell, self))
        return scope

    def keep_cut_streams(self) -> dict[str, str]:
        """Record a flooded stream as every executor records it (:func:`record_cut_streams`
        over :attr:`outputs`, with what the stream kept: :meth:`StreamTee.getvalue`, the
        head, the one marker and the tail, where a flood's final lines are).  Call it when
        the streams are flushed.  What was shown live is left as it was.

        Returns:
            ``{stream name: kept text}`` of the streams that passed the cap."""
        kept = {tee.name: tee.getvalue() for tee in self.tees if tee.overflowed}
        if kept:
            self.outputs = record_cut_streams(self.outputs, kept)
        return kept

    def text(self, stderr: bool) -> str:
        """The model's view: the text of every output but stderr, or of stderr only,
        redacted once more as a whole (a secret written in two chunks is whole here)."""
        return self.redact("".join(output_text(o) for o in self.outputs
                                   if (o.get("output_type") == "stream"
                                       and o["name"] == "stderr") == stderr))


def numbers_steps(shell: Any) -> bool:
    """Whether a task's steps in ``shell`` take execution counts of their own (and go
    into ``In``/history): only in a shell that numbers the task cell with the count it
    started with whatever its steps took, the RLM kernel's
    (:class:`~rlm_kernel.jupyter.kernel.RLMShell`, which has ``step_in_progress``).

    A stock shell (``%load_ext rlm_kernel`` in a ``python3`` kernel, a terminal IPython)
    numbers a cell's reply and its ``Out[n]`` from the shell's counter once the cell has
    run (``shell.execution_count - 1``: ipykernel's ``do_execute``, IPython's
    ``DisplayHook.prompt_count``).  Steps that took counts there would give the task cell
    ``In [4]`` the last step's ``[6]`` (shown twice, 4 skipped); their steps take none, so
    the counts stay consecutive: the task cell ``[4]``, the next cell ``[5]``.

    Args:
        shell: the IPython shell the task runs in.
    """
    return callable(getattr(shell, "step_in_progress", None))


class ShellExecutor:
    """Execute steps with ``shell.run_cell`` and capture their outputs.

    Args:
        shell: an IPython ``InteractiveShell`` (the kernel's).
        on_rich_output: called with each nbformat output dict as it is made.
        store_history: record steps in ``In``/history with execution counts; False
            (a stock shell: :func:`numbers_steps`): a step takes no count, and IPython
            names its code (in tracebacks: ``Cell In[n]``) after the running cell's.
    """

    in_process = True
    """Model code runs in the kernel's own process, in its shell
    (:attr:`~rlm_kernel.executors.Executor.in_process`)."""

    def __init__(self, shell: Any, *, on_rich_output: RichOutputCallback | None = None,
                 store_history: bool = True) -> None:
        self.shell = shell
        self.namespace = shell.user_ns
        self.on_rich_output = on_rich_output
        self.store_history = store_history
        self.last_execution_count: int | None = None
        self.last_cut_streams: dict[str, str] = {}
        """``{stream name: kept text}`` of the last step's streams that passed the cap:
        the notebook's record of the step (``%rlm export``) takes them for the live text
        (:func:`record_cut_streams`)."""
        self.read_watch: ReadWatch | None = None
        """The names (and attribute names) whose reads each step records in
        ``REPLResult.names_read`` (an IPython AST transformer for the step,
        :mod:`rlm_kernel.executors.reads`); None: no record."""

    def close(self) -> None:
        """Nothing to release: the namespace is the shell's
        (:meth:`~rlm_kernel.executors.Executor.close`)."""

    def execute(self, code: str, *, timeout: float | None = None,
                on_output: OutputCallback | None = None) -> REPLResult:
        """Run ``code`` as a cell; see :class:`rlm_kernel.executors.Executor`.

        Raises:
            KeyboardInterrupt: the user interrupted the step.
        """
        self.last_cut_streams = {}
        capture = StepCapture(self.shell, self.on_rich_output, on_output,
                              counted=self.store_history)
        start = time.perf_counter()
        watch = self.read_watch
        with recording(self.namespace, watch) as recorder:
            if watch is not None:
                self.shell.ast_transformers.append(ReadInstrumenter(*watch))
            try:
                result = self._run_cell(code, timeout, capture)
            finally:
                if watch is not None:
                    self.shell.ast_transformers[:] = [
                        t for t in self.shell.ast_transformers
                        if not isinstance(t, ReadInstrumenter)]
        filter_streams()  # the host's streams are back: mute threads the step left running
        self.last_execution_count = capture.count if self.store_history else None
        if result is not None and isinstance(result.error_in_exec, KeyboardInterrupt) \
                and capture.user_interrupt:  # else model code raised it: a model error
            raise KeyboardInterrupt
        self._note_abnormal_end(capture, timeout)
        success = not capture.error and not (result is not None and not result.success
                                             and capture.final is None)
        return REPLResult(stdout=capture.text(stderr=False), stderr=capture.text(stderr=True),
                          locals=self.namespace, execution_time=time.perf_counter() - start,
                          llm_calls=[], success=success, final_output=capture.final,
                          names_read=None if recorder is None else frozenset(recorder.read))

    def _run_cell(self, code: str, timeout: float | None, capture: StepCapture) -> Any:
        """``shell.run_cell`` under the time limit with the shell's hooks swapped for
        ``capture``'s; returns the shell's ``ExecutionResult`` (None when the limit
        fired outside the cell's own code) and notes dropped outputs and host-state
        repairs at the end of the step's output."""
        with ExitStack() as stack:
            scope = capture.hooks(stack)
            if not self.store_history and self.shell.execution_count > 1:
                # IPython names a cell's code after the shell's next count: a step without
                # one is named after the running (task) cell, not the cell after it
                stack.enter_context(_swap(self.shell, "execution_count",
                                          self.shell.execution_count - 1))
            try:
                with time_limit(timeout) as limit:
                    result = self.shell.run_cell(code, store_history=self.store_history)
                capture.timeout = capture.timeout or limit.cut_short(capture.final)
            except StepTimeout:  # fired outside the cell's own code (hooks)
                result, capture.timeout = None, True
        capture.user_interrupt = scope.user_interrupt
        self.last_cut_streams = capture.keep_cut_streams()
        if capture.dropped:
            capture.outputs.append({"output_type": "stream", "name": "stderr",
                                    "text": f"[{capture.dropped:,} more outputs of this step "
                                            "dropped]\n"})
        if scope.notes():
            capture.stream("stderr", scope.notes())
        return result

    def _note_abnormal_end(self, capture: StepCapture, timeout: float | None) -> None:
        """Tell the model (in stderr) that the time limit stopped the step, or that
        ``exit()`` was refused (and drop the kernel's exit payload)."""
        if capture.timeout:
            capture.stream("stderr", timeout_message(timeout))
            capture.error = True
        if getattr(self.shell, "exit_now", False):  # exit()/quit() in model code
            self.shell.exit_now = False
            _drop_exit_payload(self.shell)
            capture.stream("stderr", "exit() ignored: model code may not stop the kernel\n")


LIVE_CUT = "characters is not shown live]\n"
"""The end of the note with which a stream's live text stops at its cap
(:class:`~rlm_kernel.executors.StreamTee`)."""


def record_cut_streams(outputs: list[dict[str, Any]], kept: dict[str, str]
                       ) -> list[dict[str, Any]]:
    """A step's outputs as its record: for each stream named in ``kept`` (one that printed
    more than the cap), its live chunks, from the first to the one that ends with the note
    that the rest is not shown live (or to its last chunk), are replaced by one ``stream``
    output at the place of the first, holding the stream's kept text.  Other outputs
    (results, displays, errors, the host's notes after the streams) stay where they are.

    Args:
        outputs: nbformat output dicts of one step, in order, as shown live.
        kept: ``{"stdout" or "stderr": kept text}`` (head, one marker, tail).

    Returns:
        A new list (``outputs`` is not changed).
    """
    record = list(outputs)
    for name, text in kept.items():
        chunks = [i for i, o in enumerate(record)
                  if o.get("output_type") == "stream" and o.get("name") == name]
        if not chunks:  # its chunks came past MAX_OUTPUTS: the kept text goes last
            record.append({"output_type": "stream", "name": name, "text": text})
            continue
        end = next((i for i in chunks if LIVE_CUT in str(record[i].get("text", ""))),
                   chunks[-1])
        drop = {i for i in chunks if i <= end}
        record = [{**o, "text": text} if i == chunks[0] else o
                  for i, o in enumerate(record) if i == chunks[0] or i not in drop]
    return record


def _capped(output: dict[str, Any]) -> dict[str, Any]:
    """``output`` with its long texts (data, error value, traceback) capped."""
    out = dict(output)
    if isinstance(out.get("data"), dict):
        out["data"] = {k: middle_cut(v) if isinstance(v, str) else v
                       for k, v in out["data"].items()}
    if isinstance(out.get("evalue"), str):
        out["evalue"] = middle_cut(out["evalue"])
    if isinstance(out.get("traceback"), list):
        lines = [middle_cut(line) if isinstance(line, str) else line for line in out["traceback"]]
        out["traceback"] = lines if len(lines) <= 200 else lines[:100] + [
            f"[... {len(lines) - 200:,} traceback lines dropped ...]"] + lines[-100:]
    return out


class _swap:  # noqa: N801 - used as a context manager, reads like a function
    """Set ``obj.name = value`` for the duration of a ``with`` block."""

    def __init__(self, obj: Any, name: str, value: Any) -> None:
        self.obj, self.name, self.value = obj, name, value
        is_method = isinstance(getattr(type(obj), name, None), types.FunctionType)
        self.shadows_method = is_method and name not in getattr(obj, "__dict__", {})

    def __enter__(self) -> None:
        self.old = getattr(self.obj, self.name)
        setattr(self.obj, self.name, self.value)

    def __exit__(self, *exc: Any) -> None:
        if self.shadows_method:
            delattr(self.obj, self.name)  # back to the class's method
        else:
            setattr(self.obj, self.name, self.old)


@contextmanager
def stock_shell_hooks(shell: Any, capture: StepCapture) -> Iterator[None]:
    """Route a stock IPython shell's output of one step to ``capture`` (the ``%rlm``
    magic in a ``python3`` kernel or a terminal IPython, whose shell has no step
    state): the smallest swap that does it, all of it here, undone when the block ends.

    IPython's own capture idiom (:class:`IPython.utils.capture.capture_output`) swaps
    the streams (done by :meth:`StepCapture.hooks` for every shell), ``display_pub``
    and ``sys.displayhook``.  A step needs four things more, each a method of the
    shell that has no public hook:

    - ``display_trap.hook``: a step run outside a cell (no active display trap) has
      the trap install its hook, not ``sys.displayhook``'s;
    - ``_showtraceback`` and ``_get_exc_info``: an error is an nbformat ``error``
      output of the step (ipykernel's sends it to IOPub), its traceback trimmed to the
      model's frames;
    - ``ask_exit``: ``exit()`` refused (:meth:`StepCapture.refuse_exit`);
    - the custom exceptions: ``FINAL`` and the time limit end the step quietly.

    :class:`~rlm_kernel.jupyter.kernel.RLMShell` does all of this with its own
    methods instead.  The private members read here are named in
    ``tests/jupyter/test_private_members.py`` (a bump of IPython that drops one fails
    it).

    Args:
        shell: the ``InteractiveShell`` the step runs in.
        capture: the step's capture.
    """
    get_exc_info = shell._get_exc_info

    def exc_info(exc_tuple: Any = None) -> tuple[Any, Any, Any]:
        return capture.exc_info(*get_exc_info(exc_tuple))

    with ExitStack() as stack:
        stack.enter_context(_swap(shell, "display_pub", _CapturingPublisher(capture.sink)))
        stack.enter_context(_swap(sys, "displayhook", capture.displayhook))
        stack.enter_context(_swap(shell.display_trap, "hook", capture.displayhook))
        stack.enter_context(_swap(shell, "_showtraceback", capture.showtraceback))
        stack.enter_context(_swap(shell, "_get_exc_info", exc_info))
        stack.enter_context(_swap(shell, "ask_exit", capture.refuse_exit))
        saved_custom = (shell.custom_exceptions, shell.CustomTB)
        shell.set_custom_exc((FinalOutput, StepTimeout), capture.custom_exc)
        stack.callback(lambda: setattr(shell, "custom_exceptions", saved_custom[0]))
        stack.callback(lambda: setattr(shell, "CustomTB", saved_custom[1]))
        yield


def _drop_exit_payload(shell: Any) -> None:
    manager = getattr(shell, "payload_manager", None)
    if manager is None:
        return
    payloads = manager.read_payload()
    manager.clear_payload()
    for payload in payloads:
        if payload.get("source") != "ask_exit":
            manager.write_payload(payload)
