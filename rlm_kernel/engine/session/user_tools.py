"""The user's tools, lent to a run without being handed over.

A tool is one of the user's own functions (``RLM(tools=[parse_log])``, ``%rlm tools
add``).  In-process, model code could rewrite it in place: ``parse_log.__code__ = ...``,
``parse_log.__defaults__ = ...``, ``parse_log.__globals__['json'] = None`` (the module
of the tool, and every function of it that uses ``json``), a closure cell's contents.
Rebinding the *name* is undone by the engine (a tool is a protected input); these
changes keep the object's identity, so they would outlast the run.

The design, in two parts (:class:`LentTools`):

1. **A copy is bound, never the user's function.**  For a plain Python function the
   namespace gets a new function object with the same code, globals, defaults,
   closure, name, doc and attributes: it behaves the same (a notebook function still
   reads the run's ``llm_query`` from its globals), but assigning its ``__code__``,
   ``__defaults__``, ``__kwdefaults__`` or attributes changes the copy only.  A bound
   method gets a copy of its function bound to the same object.  Other callables
   (classes, ``functools.partial``, builtins, callable objects) are bound as they are.
2. **What the copy shares is put back.**  The copy shares its module's globals and
   its closure cells with the user's function.  When the run lends the tools, it
   records, for the tool, its copy and every function reachable from the tool through
   the globals it reads and its closure cells (up to :data:`MAX_FUNCTIONS`): the function's code,
   defaults and keyword defaults, its closure cells' contents, and the module globals
   its code reads (``LOAD_GLOBAL`` names, nested code included; names it writes
   itself with ``global`` are its own state and left alone), present or absent.
   :meth:`LentTools.restore` puts back whatever differs; the run calls it after every
   step (the model is told, as for any input put back) and once more when it ends.
   Globals that are the run's own namespace (a function defined in the notebook) are
   not recorded: that namespace is the model's workspace, guarded by the engine's
   protected inputs.

Not covered: objects changed in place (a default list appended to, an attribute of a
module the tool uses rewritten), and, in-process, anything ``gc`` or ``ctypes`` can
reach.  Behind the process wall (the isolated executor) tools are served from the host
and model code never holds them at all.
"""

from __future__ import annotations

import dis
import types
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LentTools", "MAX_FUNCTIONS"]

MAX_FUNCTIONS = 256
"""Functions recorded per run (the tools and what they reach), at most."""

_MISSING = object()
_GLOBAL_WRITES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})


def copy_function(fn: types.FunctionType) -> types.FunctionType:
    """A new function object that behaves as ``fn``: same code, globals, closure,
    defaults, name, qualified name, module, doc, annotations and attributes.

    Args:
        fn: a plain Python function.

    Returns:
        The copy; changing its ``__code__``, defaults or attributes leaves ``fn`` as
        it was (its globals and closure cells are shared, see :class:`LentTools`).
    """
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__qualname__, copy.__module__, copy.__doc__ = fn.__qualname__, fn.__module__, \
        fn.__doc__
    copy.__annotations__ = dict(fn.__annotations__)
    copy.__dict__.update(fn.__dict__)  # never a __wrapped__ of our own: it would hand out fn
    copy.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    return copy


def lend(tool: Any) -> Any:
    """What the namespace gets for ``tool``: a copy of a plain function, a bound
    method over a copy of its function, else ``tool`` itself."""
    if isinstance(tool, types.FunctionType):
        return copy_function(tool)
    if isinstance(tool, types.MethodType) and isinstance(tool.__func__, types.FunctionType):
        return types.MethodType(copy_function(tool.__func__), tool.__self__)
    return tool


def _global_reads(code: types.CodeType) -> set[str]:
    """The global names ``code`` (and the code nested in it) reads and does not itself
    write with ``global``."""
    reads: set[str] = set()
    writes: set[str] = set()
    stack, seen = [code], 0
    while stack and seen < 1000:
        co = stack.pop()
        seen += 1
        for ins in dis.get_instructions(co):
            if ins.opname == "LOAD_GLOBAL" and isinstance(ins.argval, str):
                reads.add(ins.argval)
            elif ins.opname in _GLOBAL_WRITES and isinstance(ins.argval, str):
                writes.add(ins.argval)
        stack.extend(c for c in co.co_consts if isinstance(c, types.CodeType))
    return reads - writes


class _FunctionState:
    """One function's restorable state, as it was when recorded."""

    def __init__(self, fn: types.FunctionType) -> None:
        self.fn = fn
        self.code, self.defaults, self.kwdefaults = fn.__code__, fn.__defaults__, \
            fn.__kwdefaults__
        self.cells: list[tuple[types.CellType, Any]] = []
        for cell in fn.__closure__ or ():
            try:
                self.cells.append((cell, cell.cell_contents))
            except ValueError:  # an empty cell (a name assigned later)
                self.cells.append((cell, _MISSING))

    def restore(self) -> bool:
        """Put back what differs; True when something did."""
        fn, changed = self.fn, False
        if fn.__code__ is not self.code:
            fn.__code__, changed = self.code, True
        if fn.__defaults__ is not self.defaults:
            fn.__defaults__, changed = self.defaults, True
        if fn.__kwdefaults__ is not self.kwdefaults:
            fn.__kwdefaults__, changed = self.kwdefaults, True
        for cell, value in self.cells:
            try:
                now = cell.cell_contents
            except ValueError:
                now = _MISSING
            if now is value:
                continue
            changed = True
            if value is _MISSING:
                del cell.cell_contents
            else:
                cell.cell_contents = value
        return changed


class LentTools:
    """The user's tools as a run binds them, and what they share, put back on demand.

    Args:
        tools: ``{name: callable}``, the user's tools.
        namespace: the run's namespace; globals that are this dict are not recorded
            (the model's workspace, see the module docstring).
        copy: bind copies (:func:`lend`); False binds the tools themselves (behind the
            process wall, where model code never holds a host object).

    Attributes:
        originals: the user's tools, by name.
        bound: what the namespace gets instead, by name (:func:`lend`).
    """

    def __init__(self, tools: Mapping[str, Callable[..., Any]],
                 namespace: Mapping[str, Any] | None = None, *, copy: bool = True) -> None:
        self.originals = dict(tools)
        self.bound = {name: lend(tool) if copy else tool
                      for name, tool in self.originals.items()}
        self._functions: list[_FunctionState] = []
        self._globals: list[tuple[dict[str, Any], str, Any]] = []
        self._record(namespace)

    def _record(self, namespace: Mapping[str, Any] | None) -> None:
        """Record the tools' functions, what they reach and the globals they read."""
        todo: list[Any] = []
        for name, tool in self.originals.items():
            todo.append(getattr(tool, "__func__", tool))
            lent = getattr(self.bound[name], "__func__", self.bound[name])
            if lent is not todo[-1] and isinstance(lent, types.FunctionType):
                self._functions.append(_FunctionState(lent))  # the copy, for later steps
        seen: set[int] = set()
        seen_globals: set[tuple[int, str]] = set()
        while todo and len(self._functions) < MAX_FUNCTIONS:
            fn = todo.pop(0)
            if not isinstance(fn, types.FunctionType) or id(fn) in seen:
                continue
            seen.add(id(fn))
            state = _FunctionState(fn)
            self._functions.append(state)
            todo.extend(value for _, value in state.cells)
            module = fn.__globals__
            if module is namespace:
                continue
            for name in sorted(_global_reads(fn.__code__)):
                if (id(module), name) in seen_globals:
                    continue
                seen_globals.add((id(module), name))
                value = module.get(name, _MISSING)
                self._globals.append((module, name, value))
                todo.append(value)

    def restore(self) -> list[str]:
        """Put back the recorded functions' code, defaults and closure contents and
        the module globals they read.

        Returns:
            The names of the tools whose function or module globals were changed (all
            of them when only something they reach was), in the order given; empty
            when nothing was.
        """
        changed_fns = {id(s.fn) for s in self._functions if s.restore()}
        for name, tool in self.originals.items():  # a copy changed: its user's tool was
            lent = getattr(self.bound[name], "__func__", None) or self.bound[name]
            if id(lent) in changed_fns:
                changed_fns.add(id(getattr(tool, "__func__", tool)))
        changed_modules: set[int] = set()
        for module, name, value in self._globals:
            now = module.get(name, _MISSING)
            if now is value:
                continue
            changed_modules.add(id(module))
            if value is _MISSING:
                module.pop(name, None)
            else:
                module[name] = value
        report = []
        for name, tool in self.originals.items():
            fn = getattr(tool, "__func__", tool)
            if id(fn) in changed_fns or (isinstance(fn, types.FunctionType)
                                         and id(fn.__globals__) in changed_modules):
                report.append(name)
        if (changed_fns or changed_modules) and not report:
            report = list(self.originals)
        return report
