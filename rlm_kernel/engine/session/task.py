"""What a task asks beyond its question and variables: the answer's type, the earlier
tasks of the conversation, the user's own functions offered as tools, and which
variables are read-only inputs.

:class:`TaskSpec` travels with a run (``RLM.run(question, context, output_type=...,
history=..., tools=...)``, the ``%rlm`` magic, ``rlm run``); :class:`~rlm_kernel.engine.run.Run`
reads it when it writes the task message, takes a ``FINAL``, and restores inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...executors import WorkFolder
from ..answer.types import AnswerType
from ..names import RESERVED_NAMES, SESSION_NAMES
from ..prompts import describe_tool
from .conversation import HISTORY_NAME, Conversation

__all__ = ["TaskSpec", "check_tools", "describe_tool"]


@dataclass
class TaskSpec:
    """A task's terms besides its question and variables.

    Attributes:
        output_type: the type the answer must have (``FINAL`` values are validated
            and coerced), or None: any value.
        history: the session's earlier tasks the model is told about, or None.
        tools: the user's functions offered to the model, by name (bound in the REPL,
            described in the task message, restored if model code rebinds them).
        protected: the input variables restored when model code rebinds or deletes
            them; None: every variable given to the run.
        folder: the working folder whose helpers (``ls``, ``read`` ...) are bound,
            restored like tools, and described in the task message; or None.
    """

    output_type: AnswerType | None = None
    history: Conversation | None = None
    tools: dict[str, Callable[..., Any]] = field(default_factory=dict)
    protected: Collection[str] | None = None
    folder: WorkFolder | None = None

    def __post_init__(self) -> None:
        self.tools = check_tools(self.tools)


def check_tools(tools: Mapping[str, Any] | Collection[Any] | None) -> dict[str, Callable[..., Any]]:
    """The tools by name: a mapping as given, or a list of functions by ``__name__``.

    Raises:
        TypeError: a tool is not callable, or a list item has no usable ``__name__``.
        ValueError: a name is not an identifier or is one of the names the REPL
            reserves (``llm_query``, ``FINAL``, ``search`` ... and ``rlm_history``).
    """
    if not tools:
        return {}
    if isinstance(tools, Mapping):
        named = dict(tools)
    else:
        named = {}
        for tool in tools:
            name = getattr(tool, "__name__", None)
            if not isinstance(name, str) or not name.isidentifier():
                raise TypeError(f"tool {tool!r} has no name: pass tools as a dict "
                                "{name: function}")
            named[name] = tool
    for name, tool in named.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"tool name {name!r} is not a Python identifier")
        if name in RESERVED_NAMES or name in SESSION_NAMES or name == HISTORY_NAME:
            raise ValueError(f"tool name {name!r} is reserved by the REPL "
                             f"({', '.join(RESERVED_NAMES)}); rename the function")
        if not callable(tool):
            raise TypeError(f"tool {name!r} is not callable (a {type(tool).__name__})")
    return named
