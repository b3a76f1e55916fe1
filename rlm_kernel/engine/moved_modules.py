"""The engine's old module paths, kept importable after the engine was grouped by
concept: ``import rlm_kernel.engine.loop`` gives the module that now holds the code
(:mod:`rlm_kernel.engine.rlm`), the same module object, so code that reads or patches
a name there (``loop.make_client = ...``) acts on the engine itself, and a
:class:`DeprecationWarning` names the new path.  New code imports
:mod:`rlm_kernel.engine` (its public surface) instead.  Kept while the red team's fault
reproducers (``../shared/fault-cases/clidrv.py``: ``import rlm_kernel.engine.loop``;
``fault-cases-t4/x29``: ``rlm_kernel.engine.conversation``) import these paths.

The old ``rlm_kernel.engine.answer`` module is now the :mod:`~rlm_kernel.engine.answer`
package and cannot be aliased; its public names (``answer_text``,
``describe_variable``) are exported by :mod:`rlm_kernel.engine`.  The mechanism is the
import system's own: a :class:`importlib.abc.MetaPathFinder` on ``sys.meta_path``
(PEP 451), consulted only for the names below after the path finder found no file.
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

_ENGINE = "rlm_kernel.engine"

MOVED: dict[str, str] = {
    f"{_ENGINE}.{old}": f"{_ENGINE}.{new}" for old, new in {
        "loop": "rlm",
        "answer_type": "answer.types",
        "grounding": "answer.grounding",
        "vote": "answer.vote",
        "sources": "answer.sources",
        "candidates": "strategies.candidates",
        "children": "strategies.children",
        "recording": "replay.recording",
        "resume": "replay.resume",
        "conversation": "session.conversation",
        "task": "session.task",
        "tool_guard": "session.user_tools",
        "warmup": "session.warmup",
        "tools": "repl_functions",
    }.items()
}
"""Old dotted module name -> the module that holds its code now."""


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old engine module name and loads it as its new module."""

    def find_spec(self, fullname: str, path: object = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import rlm_kernel.engine instead",
                      DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        self._spec = module.__spec__  # the import system sets __spec__ to the alias's
        return module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self._spec  # the module keeps its own spec: it is already run


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (after the standard finders)."""
    if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedModuleFinder())
