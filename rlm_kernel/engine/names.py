"""The REPL's own names: the functions a run binds for model code (reserved: model code
may not keep them rebound), the session's helpers, and which of a namespace's names are
the user's data.

The bottom of the engine: it imports nothing of the engine or of the layers below it,
so every part of the engine (the answer checks, the task's terms, the REPL functions)
and the front ends can read these names without importing what binds them.
"""

from __future__ import annotations

import types
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["RESERVED_NAMES", "SESSION_NAMES", "user_variables"]

RESERVED_NAMES = ("llm_query", "llm_query_batched", "rlm_query", "FINAL", "FINAL_VAR",
                  "SHOW_VARS", "search", "split_documents", "parse_records", "code_outline",
                  "mcp_call")
"""The names a run binds in the REPL namespace for model code to call
(:class:`~rlm_kernel.engine.repl_functions.REPLFunctions` and the context helpers); the
engine puts them back after a step that rebinds or deletes one, and a user's tool may
not take one of them."""

SESSION_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "rlm_answer",
                           "rlm_history",
                           "rlm_answers"})
"""IPython's own helpers and the ``%rlm`` magic's answer slots: never the user's data."""


def user_variables(namespace: Mapping[str, Any],
                   names: Sequence[str] | None = None) -> dict[str, Any]:
    """The data variables of ``namespace``, the ones a model is told about.

    Args:
        namespace: a REPL namespace.
        names: exactly these names, in this order; default: every name that is not
            private (``_x``), reserved (:data:`RESERVED_NAMES`), an IPython helper
            (:data:`SESSION_NAMES`), a module or a callable.

    Raises:
        KeyError: a name in ``names`` is not in ``namespace`` (the message names it).
    """
    if names is not None:
        for name in names:
            if name not in namespace:
                raise KeyError(f"no variable named {name!r} in the namespace")
        return {name: namespace[name] for name in names}
    return {name: value for name, value in list(namespace.items())
            if not name.startswith("_") and name not in RESERVED_NAMES
            and name not in SESSION_NAMES
            and not isinstance(value, types.ModuleType) and not callable(value)}
