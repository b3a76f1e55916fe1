"""``%%rlm --isolated``: a task whose model code runs behind the process wall.

The kernel's point is the live namespace, so a task runs there by default.  With
``--isolated`` (or ``--executor isolated``, or ``c.RLM.executor = "isolated"``) its
steps run in an :class:`~rlm_kernel.executors.isolated.IsolatedExecutor` instead: the
named variables (``--context``, default every data variable) are copied into the child,
the user's tools are served from the kernel, and only the answer comes back (plus the
names given with ``--results``).  The notebook view is the same: each step's output
reaches the step renderer as it is written.
"""

from __future__ import annotations

from typing import Any

from ..executors.isolated import IsolatedExecutor
from ..executors.streams import OutputCallback
from ..repl_types import REPLResult

__all__ = ["IsolatedSteps"]


class IsolatedSteps(IsolatedExecutor):
    """An :class:`IsolatedExecutor` that also hands each chunk of a step's output to
    the kernel's step renderer (``on_rich_output``, as
    :class:`~rlm_kernel.jupyter.shell_executor.ShellExecutor` does), as nbformat
    ``stream`` outputs.  Its steps have no execution count: they are not cells of the
    kernel's history."""

    on_rich_output: Any = None
    last_execution_count: int | None = None

    def execute(self, code: str, *, timeout: float | None = None,
                on_output: OutputCallback | None = None) -> REPLResult:
        """Run ``code`` in the child (see :meth:`IsolatedExecutor.execute`)."""

        def tee(name: str, text: str) -> None:
            if on_output is not None:
                on_output(name, text)
            if self.on_rich_output is not None:
                self.on_rich_output({"output_type": "stream", "name": name, "text": text})

        return super().execute(code, timeout=timeout, on_output=tee)


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
