"""A run's REPL namespace: what a task puts into it before the first step, what the
host puts back after each step, and what the run made in it.

:func:`set_up_namespace` binds, in this order, the task's variables, the user's tools
(lent: :class:`~rlm_kernel.engine.session.user_tools.LentTools`), the working folder's
functions, the earlier tasks' record (:data:`~.conversation.HISTORY_NAME`) and the
run's REPL functions (the reserved names,
:class:`~rlm_kernel.engine.repl_functions.REPLFunctions`); the
:class:`RunNamespace` it returns knows which names are protected (``inputs``), which
are the user's (``user_inputs``, for the answer's source), and puts them back
(:meth:`RunNamespace.restore`) when model code rebinds or deletes them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, MutableMapping
from dataclasses import dataclass
from typing import Any

from ...executors import Executor, SupportsDescribe, variable_ids
from ...repl_types import REPLVariable
from ..answer.text import describe_variable
from ..names import RESERVED_NAMES, SESSION_NAMES, user_variables
from ..repl_functions import REPLFunctions
from .conversation import HISTORY_NAME
from .task import TaskSpec
from .user_tools import LentTools

__all__ = ["RunNamespace", "set_up_namespace"]

_MISSING = object()


@dataclass
class RunNamespace:
    """A run's namespace as the host keeps it (:func:`set_up_namespace` makes it).

    Attributes:
        executor: where the namespace lives (``executor.namespace``).
        ns: the namespace, by name.
        functions: the run's REPL functions (``llm_query``, ``FINAL`` ...).
        reserved: the reserved names and what they are bound to.
        lent: the user's tools as lent to the run.
        inputs: names put back when model code rebinds or deletes them, and their
            values (the protected variables, the tools, the folder's functions, the
            earlier tasks' record).
        user_inputs: the user's own inputs, for the answer's source: the variables
            given (but those an earlier task's code left, unless named as protected)
            and the user's tools.
        no_data: the task gave no variable, no tool and no folder.
        start_ids: ``id()`` of each variable when the run began, by name.
    """

    executor: Executor
    ns: MutableMapping[str, Any]
    functions: REPLFunctions
    reserved: dict[str, Any]
    lent: LentTools
    inputs: dict[str, Any]
    user_inputs: set[str]
    no_data: bool
    start_ids: dict[str, Hashable]

    def restore(self) -> tuple[list[str], list[str], list[str]]:
        """Undo rebinding or deletion of reserved names and protected inputs, and
        changes made in place to the user's tools and the globals they read
        (:meth:`LentTools.restore`).  Returns the reserved names, the inputs and the
        tools put back (``restored_note`` says so)."""
        ns, reserved = self.ns, self.reserved
        broken = [n for n in RESERVED_NAMES if ns.get(n) is not reserved[n]]
        for name in broken:
            ns[name] = reserved[name]
        changed = [n for n, v in self.inputs.items() if ns.get(n, _MISSING) is not v]
        for name in changed:
            ns[name] = self.inputs[name]
        return broken, changed, self.lent.restore()

    def give_back_tools(self) -> None:
        """After the run: the user's own tool objects back under their names where the
        namespace still holds the copy lent."""
        for name, tool in self.lent.originals.items():
            if self.lent.bound[name] is not tool and self.ns.get(name) is self.lent.bound[name]:
                self.ns[name] = tool

    def end_run(self, preview_chars: int) -> list[REPLVariable]:
        """After the run: names put back (:meth:`restore`), the user's own tools back
        under their names (:meth:`give_back_tools`); returns :meth:`new_variables`."""
        self.restore()
        self.give_back_tools()
        return self.new_variables(preview_chars)

    def new_variables(self, preview_chars: int) -> list[REPLVariable]:
        """Metadata of the data variables the run's steps created or rebound (the
        conversation's working state; :mod:`~rlm_kernel.engine.session.conversation`),
        previews of ``preview_chars`` characters."""
        before, executor = self.start_ids, self.executor
        if isinstance(executor, SupportsDescribe):  # made where the values live
            now = executor.variable_ids()
            return [v for v in executor.describe_variables(
                        skip=(*RESERVED_NAMES, *SESSION_NAMES), preview_length=preview_chars)
                    if (v.name not in now or before.get(v.name) != now[v.name])
                    and v.name not in self.inputs]
        return [describe_variable(n, v, preview_length=preview_chars)
                for n, v in user_variables(self.ns).items()
                if before.get(n) != id(v) and n not in self.inputs]


def set_up_namespace(executor: Executor, variables: dict[str, Any], task: TaskSpec, *,
                     functions: Callable[[MutableMapping[str, Any]], REPLFunctions],
                     protect_inputs: bool) -> RunNamespace:
    """Bind a run's names into ``executor.namespace``: the variables, the user's tools
    (in-process: copies), the folder's functions (and the run's ``finish``), the earlier
    tasks' record, then the REPL functions.

    Args:
        executor: where the model's code runs.
        variables: the task's variables, by name.
        task: the task's terms (tools, folder, earlier tasks, protected names).
        functions: makes the run's REPL functions on the namespace (called once, after
            the task's names are bound).
        protect_inputs: the variables (all, or the task's ``protected`` ones) are put
            back when model code rebinds them (``RLMConfig.protect_inputs``).
    """
    ns = executor.namespace
    ns.update(variables)
    lent = LentTools(task.tools, ns, copy=executor.in_process)
    bound = dict(lent.bound)
    if task.folder is not None:
        bound.update(task.folder.functions())
    if task.history:
        bound[HISTORY_NAME] = task.history.as_data()
    ns.update(bound)
    repl = functions(ns)
    if task.folder is not None:  # ends the run: the host's, restored like the helpers
        bound["finish"] = ns["finish"] = repl.finish
    groups = repl.tool_groups()  # the MCP servers' tools, restored like the user's tools
    ns.update(groups)
    bound.update(groups)
    protected = task.protected
    inputs = {n: v for n, v in variables.items()
              if protected is None or n in protected} if protect_inputs else {}
    inputs.update(bound)
    working = task.history.working_names(variables) if task.history else set()
    user_inputs = {n for n in variables
                   if n not in working or (protected is not None and n in protected)}
    user_inputs.update(task.tools)
    user_inputs.update(groups)
    reserved = repl.functions()
    ns.update(reserved)
    return RunNamespace(executor=executor, ns=ns, functions=repl, reserved=reserved,
                        lent=lent, inputs=inputs, user_inputs=user_inputs,
                        no_data=not variables and not task.tools and task.folder is None
                        and not groups,
                        start_ids=variable_ids(executor))
