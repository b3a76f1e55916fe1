"""The RLM kernel: IPython, plus RLM tasks written as ``%%rlm`` cells or prose.

A thin layer over IPython's kernel: it loads the ``%rlm`` magic at start and
routes a cell of prose (text that is neither Python nor IPython syntax) to it.
More overrides serve tasks: the task cell's reply and its result (``Out[n]``) keep
the cell's own execution count (:class:`TaskDisplayHook`), the kernel stays "busy"
for the frontend while a run goes, and the shell (:class:`RLMShell`, ipykernel's
``shell_class`` seam) knows when a step runs and routes the step's displays, results,
tracebacks, ``exit()`` and ``FINAL`` with its own methods.  Everything else behaves as
in the ``python3`` kernel.

Every behaviour is a method of :class:`RLMKernel` or :class:`RLMShell`; nothing is
assigned to a live kernel or shell instance.  A ``python3`` kernel with ``%load_ext
rlm_kernel`` gets the magic but not these overrides (ipykernel has no hook for them):
there, a task's steps take no execution count (the reply and ``Out[n]`` are numbered
from the shell's counter after the cell, so the task cell keeps its own only if its
steps took none: :func:`~rlm_kernel.jupyter.shell_executor.numbers_steps`), and a step
swaps the stock shell's hooks for its length
(:func:`~rlm_kernel.jupyter.shell_executor.stock_shell_hooks`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ipykernel.displayhook import ZMQShellDisplayHook
from ipykernel.ipkernel import IPythonKernel
from ipykernel.zmqshell import ZMQDisplayPublisher, ZMQInteractiveShell
from traitlets import Bool, Type

from .._version import __version__
from ..executors import StepTimeout
from ..termination import FinalOutput
from .magic import RLMMagics
from .prose import is_prose
from .shell_executor import StepCapture, display_output

if TYPE_CHECKING:
    from IPython.core.extensions import ExtensionManager
    from IPython.core.history import HistoryManager
    from IPython.core.magic import MagicsManager

__all__ = ["RLMKernel", "RLMShell", "StepDisplayPublisher", "TaskDisplayHook"]

_STEP_EXCEPTIONS = (FinalOutput, StepTimeout)
"""What ends a step without a traceback (:meth:`StepCapture.custom_exc`)."""


class TaskDisplayHook(ZMQShellDisplayHook):
    """The shell's display hook, whose ``Out[n]`` is the running cell's own count.

    IPython numbers a cell's result ``shell.execution_count - 1``.  A task cell's steps
    run through the shell and take counts of their own, so a task cell ``In [2]`` whose
    two steps were ``[3]`` and ``[4]`` would show its answer as ``Out[4]``.  While
    :attr:`cell_count` is set (by :meth:`RLMKernel.do_execute`, for the cell it runs)
    and no run is in progress (a step's results keep their own numbers), the result
    is numbered with it (and stored as ``Out[2]``, ``_2``)."""

    cell_count: int | None = None

    @property
    def prompt_count(self) -> int:
        """The count of the cell whose result this is."""
        kernel = getattr(self.shell, "kernel", None)
        if self.cell_count is not None and not getattr(kernel, "run_in_progress", False):
            return self.cell_count
        return super().prompt_count

    def __call__(self, result: Any = None) -> None:
        """A trailing expression's value: the running step's result
        (:meth:`StepCapture.displayhook`) during a step, else the cell's ``Out[n]``."""
        step = getattr(self.shell, "step", None)
        if step is not None:
            step.displayhook(result)
        else:
            super().__call__(result)


class StepDisplayPublisher(ZMQDisplayPublisher):
    """ipykernel's display publisher; during a step (:attr:`RLMShell.step`) a
    ``display()`` or ``clear_output()`` is an output of the step instead."""

    # ignore[override]: the signature of ZMQDisplayPublisher.publish, the method
    # overridden (no ``source``; ipykernel ignores the same mismatch with IPython's).
    def publish(self, data: dict[str, Any],  # type: ignore[override]
                metadata: dict[str, Any] | None = None, *,
                transient: dict[str, Any] | None = None, update: bool = False,
                **kwargs: Any) -> None:
        """Publish ``data``, or give it to the running step (see the class)."""
        step = getattr(self.shell, "step", None)
        if step is not None:
            step.sink(display_output(data, metadata, transient))
        else:
            super().publish(data, metadata, transient=transient, update=update, **kwargs)

    def publish_outside_step(self, data: dict[str, Any], metadata: dict[str, Any] | None,
                             *, transient: dict[str, Any] | None = None,
                             update: bool = False) -> None:
        """Publish ``data`` to the task cell even during a step (the run's own
        displays: its inline steps and progress)."""
        super().publish(data, metadata, transient=transient, update=update)

    def clear_output(self, wait: bool = False) -> None:
        """Clear the cell's output, or note the clearing in the running step's."""
        step = getattr(self.shell, "step", None)
        if step is not None:
            step.sink({"output_type": "clear_output", "wait": wait})
        else:
            super().clear_output(wait)


class RLMShell(ZMQInteractiveShell):
    """ipykernel's shell (installed by :attr:`RLMKernel.shell_class`) that knows when a
    step of an RLM run is in progress (:meth:`step_in_progress`).  During a step its own
    methods route the step's displays (:class:`StepDisplayPublisher`), the value of a
    trailing expression (:class:`TaskDisplayHook`), tracebacks (trimmed to the model's
    frames), ``exit()`` (refused) and ``FINAL`` / the time limit (custom exceptions) to
    the step's :class:`~rlm_kernel.jupyter.shell_executor.StepCapture`; outside one they
    are ipykernel's.  Nothing of the live shell is swapped per step (a stock shell's
    step: :func:`~rlm_kernel.jupyter.shell_executor.stock_shell_hooks`)."""

    displayhook_class = Type(TaskDisplayHook)
    display_pub_class = Type(StepDisplayPublisher)

    # IPython's managers, made by InteractiveShell.__init__ (their traits allow None).
    extension_manager: ExtensionManager
    history_manager: HistoryManager
    magics_manager: MagicsManager

    _step: StepCapture | None = None
    _custom_exceptions: tuple[type[BaseException], ...] = ()
    _custom_tb: Callable[..., Any] | None = None

    @contextmanager
    def step_in_progress(self, capture: StepCapture) -> Iterator[None]:
        """Make ``capture`` the step in progress for the ``with`` block (the
        ``ShellExecutor`` runs the step's cell inside it)."""
        outer, self._step = self._step, capture
        try:
            yield
        finally:
            self._step = outer

    @property
    def step(self) -> StepCapture | None:
        """The step in progress, or None (also while the step's capture hands an
        output on: what the run's renderer publishes then is the task cell's)."""
        step = self._step
        return None if step is None or step.forwarding else step

    def _showtraceback(self, etype: Any, evalue: Any, stb: list[str]) -> None:
        """ipykernel's error message, or an ``error`` output of the running step."""
        step = self.step
        if step is not None:
            step.showtraceback(etype, evalue, stb)
        else:
            super()._showtraceback(etype, evalue, stb)

    def _get_exc_info(self, exc_tuple: Any = None) -> tuple[Any, Any, Any]:
        """IPython's exception info; a step's traceback ends at the model's frames."""
        info = super()._get_exc_info(exc_tuple)
        step = self.step
        return step.exc_info(*info) if step is not None else info

    def ask_exit(self) -> None:
        """``exit()``: stops the kernel, except from a step's code (refused)."""
        step = self.step
        if step is not None:
            step.refuse_exit()  # raises SystemExit, shown in the step's output
        else:
            super().ask_exit()

    @property
    def custom_exceptions(self) -> tuple[type[BaseException], ...]:
        """The exceptions IPython hands to :attr:`CustomTB` (``set_custom_exc``); during a
        step also ``FINAL``'s and the time limit's."""
        if self._step is not None:
            return (*self._custom_exceptions, *_STEP_EXCEPTIONS)
        return self._custom_exceptions

    @custom_exceptions.setter
    def custom_exceptions(self, value: tuple[type[BaseException], ...]) -> None:
        self._custom_exceptions = value

    @property
    def CustomTB(self) -> Callable[..., Any]:  # noqa: N802 - IPython's name
        """IPython's handler of :attr:`custom_exceptions`; during a step, ``FINAL``'s and
        the time limit's go to the step (:meth:`StepCapture.custom_exc`)."""
        handler, step = self._custom_tb, self._step

        def custom_tb(etype: Any, value: Any, tb: Any, tb_offset: Any = None) -> Any:
            if step is not None and isinstance(value, _STEP_EXCEPTIONS):
                return step.custom_exc(self, etype, value, tb, tb_offset)
            return handler(etype, value, tb, tb_offset=tb_offset) if handler else None

        return custom_tb

    @CustomTB.setter
    def CustomTB(self, value: Callable[..., Any]) -> None:  # noqa: N802 - IPython's name
        self._custom_tb = value


class RLMKernel(IPythonKernel):
    """IPython kernel whose prose cells are RLM tasks (``c.RLMKernel.prose_tasks``)."""

    implementation = "rlm_kernel"
    implementation_version = __version__
    banner = "RLM kernel: IPython with Recursive Language Model tasks (%%rlm, or plain prose)"
    shell_class = Type(RLMShell)

    prose_tasks = Bool(
        True,
        help="Run a cell whose text does not parse as Python and is not IPython syntax "
             "(%magic, !shell, ?help) as an RLM task, as if it started with %%rlm.",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        shell = self.own_shell
        shell.configurables.append(self)  # so `%config RLMKernel.prose_tasks` works
        shell.extension_manager.load_extension("rlm_kernel")

    @property
    def own_shell(self) -> RLMShell:
        """This kernel's shell, made by ``IPythonKernel.__init__`` (the trait allows None).

        Raises:
            RuntimeError: the kernel has no shell (a kernel being closed).
        """
        shell = self.shell
        if not isinstance(shell, RLMShell):
            raise RuntimeError(f"the RLM kernel's shell is {type(shell).__name__}")
        return shell

    @property
    def rlm_magics(self) -> RLMMagics | None:
        """The ``%rlm`` magic registered in this kernel's shell (loaded at start; None
        before that)."""
        shell = self.shell
        magics = (shell.magics_manager.registry.get(RLMMagics.__name__)
                  if shell is not None else None)
        return magics if isinstance(magics, RLMMagics) else None

    @property
    def run_in_progress(self) -> bool:
        """Whether an RLM task is running: the magic's :attr:`RLMMagics.running`, true
        from before a run's widgets appear until the run has ended."""
        magics = self.rlm_magics
        return magics is not None and magics.session.running

    async def do_execute(self, code: str, silent: bool, store_history: bool = True,
                         user_expressions: dict | None = None, allow_stdin: bool = False,
                         **kwargs: Any) -> dict[str, Any]:
        """Run ``code``; a prose cell becomes ``%%rlm`` + its text.

        The reply and the cell's result (:class:`TaskDisplayHook`) carry the
        execution count the cell started with.  ipykernel's say
        ``shell.execution_count - 1`` after the cell, which for a task cell is its last
        step's (the model's steps run through the shell and take counts of their own);
        for any other cell the two are the same.
        """
        if self.prose_tasks and not silent and is_prose(code, magics=self._automagics()):
            code = "%%rlm\n" + code
        shell = self.own_shell
        count = shell.execution_count
        hook = shell.displayhook
        numbered = store_history and not silent and isinstance(hook, TaskDisplayHook)
        if numbered:
            hook.cell_count = count
        try:
            reply = await super().do_execute(code, silent, store_history, user_expressions,
                                             allow_stdin, **kwargs)
        finally:
            if numbered:
                hook.cell_count = None
        if store_history and not silent and reply.get("execution_count", count) > count:
            reply["execution_count"] = count
        return reply

    def _publish_status(self, status: str, channel: str,
                        parent: dict[str, Any] | None = None) -> None:
        """ipykernel's IOPub status message, except for requests on other channels
        than the shell while a run goes (:attr:`run_in_progress`).

        While a task cell runs, JupyterLab's widget manager sends control-channel
        requests (``create_subshell_request`` when a run's widgets appear, with
        ipykernel 7's subshells).  ipykernel answers each with ``busy`` then ``idle``
        on IOPub, and a frontend that takes that ``idle`` as the kernel's state shows
        it idle for the rest of the run.  The kernel is busy with the run; the shell's
        own ``busy``/``idle`` around the task cell are published as always.
        """
        if channel != "shell" and self.run_in_progress:
            return
        super()._publish_status(status, channel, parent)

    def _automagics(self) -> frozenset[str]:
        """Line magics callable without ``%`` (empty when ``%automagic`` is off)."""
        shell = self.shell
        if shell is None or not getattr(shell, "automagic", False):
            return frozenset()
        return frozenset(shell.magics_manager.magics.get("line", {}))

    # ignore[override]: ipykernel's Kernel declares do_history async, its IPythonKernel
    # (overridden here) defines it as a plain method.
    def do_history(  # type: ignore[override]
            self, hist_access_type: str, output: bool, raw: bool, session: int = 0,
                   start: int = 0, stop: int | None = None, n: int | None = None,
                   pattern: str | None = None, unique: bool = False) -> dict[str, Any]:
        """IPython's history, but a range over the running session reports that
        session's real number (IPython's in-memory rows say 0)."""
        reply = super().do_history(hist_access_type, output, raw, session, start, stop, n,
                                   pattern, unique)
        current = self.own_shell.history_manager.session_number
        if hist_access_type == "range" and session in (0, current):
            reply["history"] = [(current if row[0] == 0 else row[0], *row[1:])
                                for row in reply.get("history", [])]
        return reply

