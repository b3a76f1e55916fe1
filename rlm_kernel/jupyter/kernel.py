"""The RLM kernel: IPython, plus RLM tasks written as ``%%rlm`` cells or prose.

A thin layer over IPython's kernel: it loads the ``%rlm`` magic at start and
routes a cell of prose (text that is neither Python nor IPython syntax) to it.
Everything else behaves as in the ``python3`` kernel.
"""

from __future__ import annotations

from typing import Any

from ipykernel.ipkernel import IPythonKernel
from traitlets import Bool

from .. import __version__
from .prose import is_prose

__all__ = ["RLMKernel"]


class RLMKernel(IPythonKernel):
    """IPython kernel whose prose cells are RLM tasks (``c.RLMKernel.prose_tasks``)."""

    implementation = "rlm_kernel"
    implementation_version = __version__
    banner = "RLM kernel: IPython with Recursive Language Model tasks (%%rlm, or plain prose)"

    prose_tasks = Bool(
        True,
        help="Run a cell whose text does not parse as Python and is not IPython syntax "
             "(%magic, !shell, ?help) as an RLM task, as if it started with %%rlm.",
    ).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.shell.configurables.append(self)  # so `%config RLMKernel.prose_tasks` works
        self.shell.extension_manager.load_extension("rlm_kernel")

    async def do_execute(self, code: str, silent: bool, store_history: bool = True,
                         user_expressions: dict | None = None, allow_stdin: bool = False,
                         **kwargs: Any):
        """Run ``code``; a prose cell becomes ``%%rlm`` + its text."""
        if self.prose_tasks and not silent and is_prose(code, magics=self._automagics()):
            code = "%%rlm\n" + code
        # The task cell's own execution count is kept by the extension
        # (rlm_kernel.jupyter.session.keep_task_count), as in any other ipykernel.
        return await super().do_execute(code, silent, store_history, user_expressions,
                                        allow_stdin, **kwargs)

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

