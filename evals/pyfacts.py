"""Facts about Python source found with ``ast`` (the ground truth of the code questions)."""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import PurePosixPath
from typing import Any

from . import sources

__all__ = ["Func", "Klass", "Facts", "facts", "PkgIndex", "pkg_index", "plain_lines",
           "public", "enclosing_function"]


@dataclass(frozen=True)
class Func:
    """A ``def``/``async def``: where it is, its parameters, defaults and decorators."""

    name: str
    lineno: int
    end_lineno: int
    params: tuple[str, ...]          # every parameter, in order, incl. self, *args, **kwargs
    positional: tuple[str, ...]      # positional-only and ordinary parameters
    defaults: tuple[tuple[str, Any], ...]  # (parameter, literal default) for constant defaults
    decorators: tuple[str, ...]
    cls: str | None                  # the class whose body holds it directly
    scope: str                       # "module", "class" or "function"
    conditional: bool                # inside an if/try/with/for/... block of that scope

    @property
    def top(self) -> bool:
        """Directly in the module body."""
        return self.scope == "module" and not self.conditional

    @property
    def length(self) -> int:
        return self.end_lineno - self.lineno + 1


@dataclass(frozen=True)
class Klass:
    """A ``class`` statement: where it is, its bases and the methods in its body."""

    name: str
    lineno: int
    end_lineno: int
    bases: tuple[str, ...]
    methods: tuple[str, ...]          # defs directly in the class body
    scope: str                        # "module", "class" or "function"
    conditional: bool                 # inside an if/try/with/for/... block of that scope
    decorated: bool
    conditional_methods: int          # defs in if/try/... blocks of the class body

    @property
    def top(self) -> bool:
        """Directly in the module body."""
        return self.scope == "module" and not self.conditional


@dataclass(frozen=True)
class Facts:
    """Everything :func:`facts` finds in one file."""

    funcs: tuple[Func, ...]
    classes: tuple[Klass, ...]
    constants: tuple[tuple[str, int, int], ...]  # module-level NAME = <int>: (name, value, line)

    @property
    def top_funcs(self) -> list[Func]:
        return [f for f in self.funcs if f.top]

    @property
    def top_classes(self) -> list[Klass]:
        return [c for c in self.classes if c.top]

    @property
    def plain_top(self) -> bool:
        """No function or class is defined inside an if/try/... block at module level, so
        counting ``def``/``class`` at column 0 and walking ``tree.body`` agree."""
        return not any(x.scope == "module" and x.conditional
                       for x in (*self.funcs, *self.classes))


def _func(node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None, scope: str,
          conditional: bool) -> Func:
    a = node.args
    positional = tuple(p.arg for p in (*a.posonlyargs, *a.args))
    params = positional
    if a.vararg:
        params += (a.vararg.arg,)
    params += tuple(p.arg for p in a.kwonlyargs)
    if a.kwarg:
        params += (a.kwarg.arg,)
    defaults = []
    with_default = positional[len(positional) - len(a.defaults):]
    for arg, default in zip(with_default, a.defaults, strict=True):
        if isinstance(default, ast.Constant):
            defaults.append((arg, default.value))
    for p, default in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        if isinstance(default, ast.Constant):
            defaults.append((p.arg, default.value))
    return Func(node.name, node.lineno, node.end_lineno or node.lineno, params, positional,
                tuple(defaults), tuple(ast.unparse(d) for d in node.decorator_list), cls, scope,
                conditional)


@cache
def facts(text: str) -> Facts:
    """Functions, classes and integer constants of a source text (empty if it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return Facts((), (), ())
    funcs: list[Func] = []
    classes: list[Klass] = []

    def visit(body: list[ast.stmt], scope: str, cls: str | None, cond: bool) -> None:
        # scope: "module", "class" or "function"; cond: inside an if/try/... block of it.
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                funcs.append(_func(node, cls if scope == "class" and not cond else None,
                                   scope, cond))
                visit(node.body, "function", None, False)
            elif isinstance(node, ast.ClassDef):
                defs = (ast.FunctionDef, ast.AsyncFunctionDef)
                methods = tuple(n.name for n in node.body if isinstance(n, defs))
                nested = sum(isinstance(n, defs) for stmt in node.body
                             if not isinstance(stmt, (*defs, ast.ClassDef))
                             for n in ast.walk(stmt))
                classes.append(Klass(node.name, node.lineno, node.end_lineno or node.lineno,
                                     tuple(ast.unparse(b) for b in node.bases), methods,
                                     scope, cond, bool(node.decorator_list), nested))
                visit(node.body, "class", node.name, False)
            else:
                for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit([n for n in inner if isinstance(n, ast.AST)], scope, cls, True)

    visit(tree.body, "module", None, False)
    constants = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Constant)
                and type(node.value.value) is int):
            constants.append((node.targets[0].id, node.value.value, node.lineno))
    funcs.sort(key=lambda f: f.lineno)
    classes.sort(key=lambda c: c.lineno)
    return Facts(tuple(funcs), tuple(classes), tuple(constants))


def enclosing_function(text: str, lineno: int) -> Func | None:
    """The innermost function whose body holds line ``lineno`` (1-based)."""
    inside = [f for f in facts(text).funcs if f.lineno < lineno <= f.end_lineno]
    return max(inside, key=lambda f: f.lineno) if inside else None


def public(name: str) -> bool:
    """A findable name: not private, longer than 4 characters."""
    return not name.startswith("_") and len(name) > 4


def plain_lines(text: str) -> bool:
    """True if ``splitlines()`` and ``split("\\n")`` agree (no form feeds, no ``\\r``...)."""
    return re.search("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]", text) is None


@dataclass(frozen=True)
class PkgIndex:
    """A stdlib package's files with their facts and textual ``def``/``class`` counts."""

    name: str
    files: dict[str, str]
    facts: dict[str, Facts]
    def_counts: Counter[str]    # how often "def NAME" occurs in all the text
    class_counts: Counter[str]  # how often "class NAME" occurs in all the text
    basenames: Counter[str]

    def unique_base(self, path: str) -> bool:
        """True if no other file of the package has the same base name."""
        return self.basenames[PurePosixPath(path).name] == 1

    def owners(self, top_only: bool = True) -> dict[str, list[str]]:
        """``{function name: [paths defining it]}`` (top-level functions by default)."""
        out: dict[str, list[str]] = {}
        for path, f in self.facts.items():
            for func in f.funcs:
                if func.top or not top_only:
                    out.setdefault(func.name, [])
                    if path not in out[func.name]:
                        out[func.name].append(path)
        return out


def index_files(name: str, files: dict[str, str]) -> PkgIndex:
    """Index any ``{path: source}`` mapping."""
    defs: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    for text in files.values():
        defs.update(re.findall(r"\bdef\s+(\w+)", text))
        classes.update(re.findall(r"\bclass\s+(\w+)", text))
    return PkgIndex(name, files, {p: facts(t) for p, t in files.items()}, defs, classes,
                    Counter(PurePosixPath(p).name for p in files))


@cache
def pkg_index(package: str) -> PkgIndex:
    """The index of one stdlib package."""
    return index_files(package, sources.stdlib_package(package))
