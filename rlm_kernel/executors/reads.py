"""Which watched names a step's code read while it RAN: the executed-reads record behind
an answer's source (:mod:`rlm_kernel.engine.answer.sources`).

**Mechanism: the step's loads of the watched names are instrumented** when the step is
compiled (:func:`instrument`, an :class:`ast.NodeTransformer`; in the notebook's
executor, an IPython ``ast_transformers`` entry for the step): each such load becomes a
call of the step's recorder, ``__rlm_read__.note(name, <the load>)``, which notes the
name and returns the value, until the name is recorded; after that the load costs one
set lookup (``name in __rlm_read__.read``).  Only loads of the watched names (the
user's inputs, the data helpers, the working folder's readers) are touched, so a step's
cost does not grow with its other work: a loop that never reads an input runs as
before (``bench/bench_reads.py`` measures both).  Python 3.11
has no ``sys.monitoring``; a ``sys.settrace`` tracer was weighed and set aside: while
one is set, every instruction of every frame of the thread goes through the
interpreter's tracing path, whatever the frames traced, it would replace a debugger's or
coverage's tracer, and it sees lines, not loads (``x = context if False else 1`` is one
line).

What is recorded, by site (a site records only when it runs):

- a load of a watched name (``len(context)``, a ``def``'s or a lambda's or a
  comprehension's body when it runs, ``context += ...``), when the value loaded is the
  object the name was bound to when the step started (a parameter or a local of the
  same name, or the model's own rebinding, is not the input: identity, not name);
- a subscript or a call whose key or argument is the text of a watched name
  (``globals()["context"]``, ``vars()["context"]``, ``globals().get("context")``,
  ``getattr(m, "context")``, ``eval("context")``), when its result is that object: a
  string that only names an input (``_ = "context"``, ``print("context")``) reads
  nothing;
- ``FINAL_VAR("x")`` with ``x`` watched: the call reads the variable (recorded when its
  argument is evaluated);
- a call of a data helper (:data:`DATA_HELPERS`) without its data argument, as
  ``"<helper>()"``: the helper reads the run's main variable;
- an attribute load of a watched folder reader (``p.read_text``, ``os.listdir``), by
  name (no object to compare).

Not seen (a false alarm, never a false assurance, unless model code lies): code compiled
at run time (``eval("len(context)")``, ``exec``), a name built at run time.

**Trust.**  In-process, model code runs in the host process and could call the recorder
itself; in the isolated executor the worker reports the record in its step reply, which
model code can forge.  A forged record can only claim reads of inputs that model code
could have made for real in the same step (one ``len(context)``), and it labels only
that run's own answer: ``data`` says the answer's code read the user's data, not that the
answer follows from it.  Hiding a read (a record left empty) makes the answer's label a
warning.  The host keeps only names it watches.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Collection, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

__all__ = ["DATA_HELPERS", "READ_HOOK", "ReadInstrumenter", "ReadRecorder", "instrument",
           "reads_main_variable", "recording"]

log = logging.getLogger(__name__)

READ_HOOK = "__rlm_read__"
"""The namespace name of the step's recorder (:meth:`ReadRecorder.note`)."""

DATA_HELPERS = {"search": 1, "split_documents": 0, "parse_records": 0, "code_outline": 0}
"""The REPL's data helpers and the position of their ``data`` argument: called without
it (or ``data=None``) they read the run's main variable."""

_MISSING = object()


class ReadRecorder:
    """The record of one executor's steps: which watched names executed code read.

    Args:
        names (Collection[str]): the watched names.
        namespace (Mapping[str, Any]): the step's globals; the object each watched
            name is bound to when the step starts is the one a load must return to count.
    """

    def __init__(self, names: Collection[str], namespace: Mapping[str, Any]) -> None:
        self.names = frozenset(names)
        self.bound = {n: namespace.get(n, _MISSING) for n in self.names}
        self.read: set[str] = set()
        self.active = False  # True while its step runs

    def note(self, name: str, value: Any, key: str | None = None) -> Any:
        """Record ``key`` (default ``name``) when ``value`` is what ``name`` was bound to
        at the step's start (or ``name`` was not bound then); return ``value``."""
        bound = self.bound.get(name, _MISSING)
        if bound is _MISSING or value is bound:
            self.read.add(key or name)
        return value

    def mark(self, key: str, value: Any) -> Any:
        """Record ``key`` unconditionally (the site ran); return ``value``."""
        self.read.add(key)
        return value


def reads_main_variable(call: ast.Call) -> bool:
    """True when ``call`` is a data helper (:data:`DATA_HELPERS`) called without its
    data argument (or with ``data=None``), or with ``*args``/``**kwargs``."""
    func = call.func
    if not isinstance(func, ast.Name) or func.id not in DATA_HELPERS:
        return False
    if any(isinstance(a, ast.Starred) for a in call.args) \
            or any(k.arg is None for k in call.keywords):
        return True
    position = DATA_HELPERS[func.id]
    given = call.args[position] if len(call.args) > position else \
        next((k.value for k in call.keywords if k.arg == "data"), None)
    return given is None or (isinstance(given, ast.Constant) and given.value is None)


def _hook(method: str, *args: ast.expr, node: ast.AST) -> ast.Call:
    call = ast.Call(func=ast.Attribute(value=ast.Name(READ_HOOK, ast.Load()), attr=method,
                                       ctx=ast.Load()),
                    args=list(args), keywords=[])
    return ast.fix_missing_locations(ast.copy_location(call, node))


def _text(node: ast.AST, names: Collection[str]) -> str | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is str \
        and node.value in names else None


class ReadInstrumenter(ast.NodeTransformer):
    """The transformer of :func:`instrument` (also an IPython ``ast_transformers``
    entry): ``names`` and ``attributes`` as there."""

    def __init__(self, names: Collection[str], attributes: Collection[str]) -> None:
        self.names, self.attributes = frozenset(names), frozenset(attributes)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self.names:
            # ``x if "x" in __rlm_read__.read else __rlm_read__.note("x", x)``: once the
            # name is recorded, a load costs a set lookup, not a call
            seen = ast.Compare(ast.Constant(node.id), [ast.In()], [ast.Attribute(
                ast.Name(READ_HOOK, ast.Load()), "read", ast.Load())])
            load = ast.Name(node.id, ast.Load())
            test = ast.IfExp(seen, load, _hook("note", ast.Constant(node.id),
                                              ast.Name(node.id, ast.Load()), node=node))
            return ast.fix_missing_locations(ast.copy_location(test, node))
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> Any:
        self.generic_visit(node)
        target = node.target
        if isinstance(target, ast.Name) and target.id in self.names:
            load = ast.copy_location(ast.Name(target.id, ast.Load()), target)
            read = ast.copy_location(
                ast.Expr(_hook("note", ast.Constant(target.id), load, node=node)), node)
            return [read, node]
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and node.attr in self.attributes:
            return _hook("mark", ast.Constant(node.attr), node, node=node)
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        name = _text(node.slice, self.names)
        if name is not None and isinstance(node.ctx, ast.Load):
            return _hook("note", ast.Constant(name), node, node=node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        main = isinstance(func, ast.Name) and reads_main_variable(node) and func.id in self.names
        helper = func.id if main and isinstance(func, ast.Name) else None
        texts = [t for a in (*node.args, *(k.value for k in node.keywords))
                 if (t := _text(a, self.names)) is not None]
        if isinstance(node.func, ast.Name) and node.func.id == "FINAL_VAR" and node.args \
                and (name := _text(node.args[0], self.names)) is not None:
            node.args[0] = _hook("mark", ast.Constant(name), node.args[0], node=node.args[0])
            texts = []
        self.generic_visit(node)
        if helper is not None:  # the helper's own load, keyed as a main-variable read
            node.func = _hook("note", ast.Constant(helper), ast.Name(helper, ast.Load()),
                              ast.Constant(f"{helper}()"), node=node.func)
        result: ast.expr = node
        for name in texts:
            result = _hook("note", ast.Constant(name), result, node=node)
        return result


def instrument(tree: ast.Module, names: Collection[str],
               attributes: Collection[str] = ()) -> ast.Module:
    """``tree`` with its reads of ``names`` recorded when they run (see the module
    docstring); the tree is changed in place and returned.  Line numbers stay (each
    new node takes its site's position: tracebacks show the model's lines).

    Args:
        tree (ast.Module): the step's parsed code.
        names (Collection[str]): the watched names.
        attributes (Collection[str]): attribute names recorded when loaded (the folder
            readers).
    """
    if not names and not attributes:
        return tree
    return ReadInstrumenter(names, attributes).visit(tree)


@contextmanager
def recording(namespace: MutableMapping[str, Any],
              watch: tuple[Collection[str], Collection[str]] | None
              ) -> Iterator[ReadRecorder | None]:
    """While a step runs, a :class:`ReadRecorder` of ``watch``'s names bound as
    :data:`READ_HOOK` in ``namespace`` (None without a watch).  After the step it holds
    no input, and a recorder of an enclosing step (a child run's step inside its
    parent's) is bound again; else it stays bound, so that a function the step defined
    still runs when called later."""
    if watch is None:
        yield None
        return
    recorder = ReadRecorder(watch[0], namespace)
    previous = namespace.get(READ_HOOK)
    recorder.active = True
    namespace[READ_HOOK] = recorder
    try:
        yield recorder
    finally:
        recorder.bound, recorder.active = {}, False
        if isinstance(previous, ReadRecorder) and previous.active:
            namespace[READ_HOOK] = previous
