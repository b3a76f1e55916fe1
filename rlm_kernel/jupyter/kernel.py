"""The RLM kernel: IPython, plus RLM tasks written as ``%%rlm`` cells or prose.

A thin layer over IPython's kernel: it loads the ``%rlm`` magic at start and
routes a cell of prose (text that is neither Python nor IPython syntax) to it.
Two more overrides serve tasks: the task cell's reply and its result (``Out[n]``) keep
the cell's own execution count (:class:`TaskDisplayHook`), and the kernel stays "busy"
for the frontend while a run goes.  Everything else behaves as in the ``python3``
kernel.

Every behaviour is a method of :class:`RLMKernel`; nothing is assigned to a live
kernel instance.  A ``python3`` kernel with ``%load_ext rlm_kernel`` gets the magic
but not these overrides (ipykernel has no hook for either): there, a task cell's reply
carries the last step's execution count.
"""

from __future__ import annotations

from typing import Any

from ipykernel.displayhook import ZMQShellDisplayHook
from ipykernel.ipkernel import IPythonKernel
from ipykernel.zmqshell import ZMQInteractiveShell
from traitlets import Bool, Type

from .. import __version__
from .magic import RLMMagics
from .prose import is_prose

__all__ = ["RLMKernel", "RLMShell", "TaskDisplayHook"]


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


class RLMShell(ZMQInteractiveShell):
    """ipykernel's shell with :class:`TaskDisplayHook`."""

    displayhook_class = Type(TaskDisplayHook)


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
        self.shell.configurables.append(self)  # so `%config RLMKernel.prose_tasks` works
        self.shell.extension_manager.load_extension("rlm_kernel")

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
        return magics is not None and magics.running

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
        count = self.shell.execution_count
        hook = self.shell.displayhook
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
        if not getattr(shell, "automagic", False):
            return frozenset()
        return frozenset(shell.magics_manager.magics.get("line", {}))

    def do_history(self, hist_access_type: str, output: bool, raw: bool, session: int = 0,
                   start: int = 0, stop: int | None = None, n: int | None = None,
                   pattern: str | None = None, unique: bool = False) -> dict[str, Any]:
        """IPython's history, but a range over the running session reports that
        session's real number (IPython's in-memory rows say 0)."""
        reply = super().do_history(hist_access_type, output, raw, session, start, stop, n,
                                   pattern, unique)
        current = self.shell.history_manager.session_number
        if hist_access_type == "range" and session in (0, current):
            reply["history"] = [(current if row[0] == 0 else row[0], *row[1:])
                                for row in reply.get("history", [])]
        return reply

