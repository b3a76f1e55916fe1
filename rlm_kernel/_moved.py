"""Old import paths of modules that moved into subpackages (issue 9, version 0.1).

``import rlm_kernel.config`` still works and gives the very module
``rlm_kernel.engine.config`` (same object, so monkeypatching either name patches
both), with a :class:`DeprecationWarning` naming the new path.  Nothing is imported
until an old name is asked for.  The aliases go away in 0.3.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

#: old module path -> new module path
MOVED: dict[str, str] = {
    "rlm_kernel.stepping": "rlm_kernel.engine.step",
    "rlm_kernel.tools": "rlm_kernel.engine.tools",
    "rlm_kernel.prompts": "rlm_kernel.engine.prompts",
    "rlm_kernel.config": "rlm_kernel.engine.config",
    "rlm_kernel.budget": "rlm_kernel.engine.budget",
    "rlm_kernel.events": "rlm_kernel.engine.events",
    "rlm_kernel.result": "rlm_kernel.engine.result",
    "rlm_kernel.options": "rlm_kernel.engine.options",
    "rlm_kernel.context_files": "rlm_kernel.context.files",
    "rlm_kernel.documents": "rlm_kernel.context.documents",
    "rlm_kernel.structure": "rlm_kernel.context.structure",
    "rlm_kernel.cli_model": "rlm_kernel.cli.model",
    "rlm_kernel.llm": "rlm_kernel.models",
    "rlm_kernel.testing": "rlm_kernel.models.scripted",
    "rlm_kernel.local_server": "rlm_kernel.models.local.server",
    "rlm_kernel.local_model": "rlm_kernel.models.local.weights",
    "rlm_kernel.timeouts": "rlm_kernel.executors.timeouts",
    "rlm_kernel.kernel": "rlm_kernel.jupyter.kernel",
    "rlm_kernel.magic": "rlm_kernel.jupyter.magic",
    "rlm_kernel.shell_executor": "rlm_kernel.jupyter.shell_executor",
    "rlm_kernel.frontend": "rlm_kernel.jupyter.frontend",
    "rlm_kernel.widgets": "rlm_kernel.jupyter.widgets",
    "rlm_kernel.install": "rlm_kernel.jupyter.install",
    "rlm_kernel.prose": "rlm_kernel.jupyter.prose",
    "rlm_kernel.host_state": "rlm_kernel.executors.host_state",
    "rlm_kernel.redaction": "rlm_kernel.executors.redaction",
    "rlm_kernel.streams": "rlm_kernel.executors.streams",
    "rlm_kernel.thread_output": "rlm_kernel.executors.thread_output",
    "rlm_kernel.usage": "rlm_kernel.models.usage",
}


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """A meta path finder that answers an old name with the new module."""

    def find_spec(self, fullname: str, path: object = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there "
                      "(the old path goes away in rlm-kernel 0.3)",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """The module is the new one, already executed."""


def install() -> None:
    """Put the alias finder on :data:`sys.meta_path` (once)."""
    if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
        sys.meta_path.append(_AliasFinder())
