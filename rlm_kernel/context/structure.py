"""Parsed views of a REPL variable: ``Key: value`` records as dicts, Python code as an outline.

Two shapes of long input recur: logs and records (package databases, e-mail headers,
configuration stanzas) and code bases.  A small model asked "the largest X among records
whose Y is Z" or "how many methods does class C define" writes ``hit["Installed-Size"]`` or
``search("def ")`` and gets it wrong; given records as dicts and code as a list of
definitions, the same model writes a one-line filter.  Pure functions; no Jupyter import.

- :func:`parse_records`: RFC 822 field syntax (``Name: value``, continuation lines start
  with whitespace, records separated by blank lines), as used by e-mail headers and
  Debian control files (Debian Policy, section 5.1).
- :func:`code_outline`: every class and function of each document that parses as Python,
  from the standard library's :mod:`ast`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from typing import Any

from .documents import Listing, matches, parse_block, select_documents, split_documents

__all__ = ["Records", "Outline", "parse_records", "code_outline", "looks_like_python",
           "detect_views", "sample_fields"]



_INT = re.compile(r"-?\d{1,18}")


class Records(Listing):
    """A list of record dicts (see :class:`rlm_kernel.context.documents.Listing`)."""

    noun = "record"
    shown = 5

    def _show(self, item: Any) -> str:
        if not isinstance(item, Mapping):
            return repr(item)
        cut = {k: (v[:40] + "..." if isinstance(v, str) and len(v) > 40 else v)
               for k, v in list(item.items())[:10]}
        more = f" (+{len(item) - 10} fields)" if len(item) > 10 else ""
        return repr(cut) + more


class Outline(Listing):
    """A list of definition dicts (see :class:`rlm_kernel.context.documents.Listing`)."""

    noun = "definition"


def _blocks(data: Any) -> Iterator[Any]:
    if isinstance(data, str):
        yield from (b for b in re.split(r"\n[ \t]*\n", data) if b.strip())
    elif isinstance(data, Mapping):
        yield from data.values()
    elif isinstance(data, (list, tuple)):
        yield from data
    else:
        yield data


def parse_records(data: Any, **where: Any) -> Records:
    """The ``Key: value`` records in ``data``, each as a dict ``{field: value}``.

    Args:
        data: a str of blank-line-separated records, or a dict / list whose values are
            record texts (a str may hold several records) or dicts already.
        **where: keep only records whose fields equal these values
            (:func:`rlm_kernel.context.documents.matches`: field names ignore case and
            ``_``/``-``, so ``Installed_Size=...`` finds ``Installed-Size``).

    Returns:
        :class:`Records`, in order; a value that is a whole integer becomes an int
        (so ``max``/``sum`` work), others stay str (continuation lines joined with
        newlines); text that is not ``Key: value`` lines is skipped.
    """
    out = Records()
    for item in _blocks(data):
        if isinstance(item, Mapping):
            out.append(dict(item))
        elif isinstance(item, str):
            for block in re.split(r"\n[ \t]*\n", item):
                record = parse_block(block)
                if record:
                    out.append({k: _typed(v) for k, v in record.items()})
    if where:
        out = Records(r for r in out if matches(r, where))
    return out


def _typed(value: Any) -> Any:
    return int(value) if isinstance(value, str) and _INT.fullmatch(value) else value


def looks_like_python(text: str) -> bool:
    """Cheap test on the first 5,000 characters: Python definitions or imports."""
    head = text[:5000]
    return bool(re.search(r"^(?:def |class |import |from \S+ import )", head, re.M))


def _args(node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[list[str], dict[str, str]]:
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:
        names.append("*" + a.vararg.arg)
    names += [x.arg for x in a.kwonlyargs]
    if a.kwarg:
        names.append("**" + a.kwarg.arg)
    positional = a.posonlyargs + a.args
    defaults = {x.arg: ast.unparse(d) for x, d in zip(positional[len(positional)
                                                                 - len(a.defaults):],
                                                      a.defaults, strict=True)}
    defaults.update({x.arg: ast.unparse(d) for x, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)
                     if d is not None})
    return names, defaults


def _walk(doc: Any, body: list[ast.stmt], parent: ast.AST | None, out: Outline,
          lines: list[str]) -> None:
    for node in body:
        text = lines[node.lineno - 1].strip()[:200] if node.lineno <= len(lines) else ""
        if isinstance(node, ast.ClassDef):
            out.append({"doc": doc, "kind": "class", "name": node.name, "line": node.lineno,
                        "end_line": node.end_lineno, "text": text,
                        "parent": getattr(parent, "name", None),
                        "bases": [ast.unparse(b) for b in node.bases],
                        "decorators": [ast.unparse(d) for d in node.decorator_list]})
            _walk(doc, node.body, node, out, lines)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names, defaults = _args(node)
            kind = "method" if isinstance(parent, ast.ClassDef) else "function"
            out.append({"doc": doc, "kind": kind, "name": node.name, "line": node.lineno,
                        "end_line": node.end_lineno, "text": text,
                        "parent": getattr(parent, "name", None), "args": names,
                        "defaults": defaults,
                        "decorators": [ast.unparse(d) for d in node.decorator_list]})
            _walk(doc, node.body, node, out, lines)
        else:  # definitions under if/try/with blocks still belong to this level
            for field in ("body", "orelse", "finalbody", "handlers"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.AST):
                    _walk(doc, inner, parent, out, lines)


def code_outline(data: Any, header: str | None = None, **where: Any) -> Outline:
    """Every class and function defined in the Python documents of ``data``.

    Args:
        data: as for :func:`rlm_kernel.context.documents.split_documents`; documents that do
            not parse as Python are skipped.
        header: the documents' header line as a regular expression (see
            :func:`~rlm_kernel.context.documents.split_documents`).
        **where: keep only definitions whose fields equal these values, e.g.
            ``kind="class"``, ``parent=None`` (top level); ``doc="a.py"`` keeps one
            document (its name, or the end of its path:
            :func:`~rlm_kernel.context.documents.select_documents`).

    Raises:
        KeyError: ``doc`` names no document.
        ValueError: ``header`` matches no line.

    Returns:
        :class:`Outline` of dicts ``{"doc", "kind": "class" | "function" | "method",
        "name", "line", "end_line", "text": its first line, "parent": enclosing class or function name or None,
        "args": parameter names ("*args", "**kw" marked), "defaults": {name: source},
        "bases": base classes (classes only), "decorators"}``; ``parent is None`` means
        top level; lines count from 1 within the document.
    """
    docs = split_documents(data, header)
    if "doc" in where:
        docs = select_documents(docs, where.pop("doc"))
    out = Outline()
    for doc, text in docs.items():
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        _walk(doc, tree.body, None, out, text.splitlines())
    if where:
        out = Outline(d for d in out if matches(d, where))
    return out


def _sample_texts(data: Any, n: int = 3) -> list[str]:
    if isinstance(data, str):
        return [data[:20_000]]
    items = list(data.values())[:n] if isinstance(data, Mapping) else \
        list(data[:n]) if isinstance(data, (list, tuple)) else []
    return [x if isinstance(x, str) else "\n".join(f"{k}: {v}" for k, v in x.items())
            for x in items if isinstance(x, (str, Mapping))]


def sample_fields(data: Any, limit: int = 8) -> list[str]:
    """The field names of the first record in ``data`` (at most ``limit``)."""
    texts = _sample_texts(data, 1)
    record = parse_block(re.split(r"\n[ \t]*\n", texts[0].strip())[0]) if texts else None
    return list(record or {})[:limit]


def detect_views(data: Any) -> list[str]:
    """Which parsed views fit ``data``: ``"records"`` and/or ``"python"`` (cheap: looks
    at the first 20,000 characters of a str, or the first 3 values of a dict/list)."""
    texts = _sample_texts(data)
    views = []
    if texts and all((r := parse_block(re.split(r"\n[ \t]*\n", t.strip())[0])) is not None
                     and len(r) >= 2 for t in texts):
        views.append("records")
    if texts and any(looks_like_python(t) for t in texts):
        views.append("python")
    return views
