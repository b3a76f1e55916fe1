"""The REPL's data helpers (``search``, ``split_documents``, ``parse_records``,
``code_outline``) as objects that run where model code runs.

A :class:`DataHelper` reads the run's main variable (``context`` unless the run names
another) from the namespace it works in.  In-process that is the namespace it was made
with; behind the isolated executor's wall the helper is copied into the worker (it
carries the executors' ``PORTABLE`` mark, ``__rlm_portable__``: its pickle names only
this module's functions) and reads the worker's namespace, so a regular expression that
never ends (``search(r'^(a+)+$', ...)``) or a huge split runs under the step's limits,
in the worker, never unbounded on the host.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .documents import Hits, search_lines
from .documents import split_documents as _split_documents
from .structure import Outline, Records
from .structure import code_outline as _code_outline
from .structure import parse_records as _parse_records

__all__ = ["DataHelper", "data_helpers", "current_namespace", "worker_namespace", "search", "split_documents", "parse_records",
           "code_outline"]

_scope = threading.local()  # the namespace and main variable of the helper being called


def worker_namespace() -> Mapping[str, Any] | None:
    """The REPL namespace of this process when it is an isolated worker, else None."""
    import sys

    worker = sys.modules.get("rlm_kernel.executors.worker")
    return None if worker is None else worker.current_namespace()


class DataHelper:
    """A helper over the run's data, callable from model code wherever it runs.

    Args:
        function: one of this module's functions (picklable by reference).
        data_name: the variable read when no data is passed.
        namespace: the namespace to read it from; None: the isolated worker's (this is
            what a copy in the worker gets: the namespace never travels).
    """

    __rlm_portable__ = True  # executors.workfolder.PORTABLE: copied, not served

    def __init__(self, function: Callable[..., Any], data_name: str = "context",
                 namespace: Mapping[str, Any] | None = None) -> None:
        self.function, self.data_name, self._namespace = function, data_name, namespace
        functools.update_wrapper(self, function)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        outer = getattr(_scope, "current", None)
        _scope.current = (self._namespace if self._namespace is not None
                          else worker_namespace(), self.data_name)
        try:
            return self.function(*args, **kwargs)
        finally:
            _scope.current = outer

    def __reduce__(self) -> tuple[Any, ...]:
        return (DataHelper, (self.function, self.data_name))

    def __repr__(self) -> str:
        return f"<REPL helper {self.function.__name__}>"


def current_namespace() -> Mapping[str, Any] | None:
    """The namespace of the :class:`DataHelper` being called (None outside one)."""
    current = getattr(_scope, "current", None)
    return None if current is None else current[0]


def _data(data: Any) -> Any:
    """``data``, or the calling helper's main variable when it is None.

    Raises:
        NameError: no data given and the main variable does not exist.
    """
    if data is not None:
        return data
    namespace, name = getattr(_scope, "current", None) or (None, "context")
    if namespace is None or name not in namespace:
        hint = ("; the files of the working folder: grep('word') or read('path')"
                if namespace is not None and callable(namespace.get("grep")) else "")
        raise NameError(f"no variable {name!r} to search: pass the data, "
                        f"e.g. search('word', my_text){hint}")
    return namespace[name]


def _header(header: Any, helper: str) -> str | None:
    """``header`` checked: a regular expression (``str``) or None.

    Raises:
        TypeError: anything else (the message names the helper: model code reads it at
            its own line, the helper's frames being hidden)."""
    if header is None or isinstance(header, str):
        return header
    raise TypeError(f"{helper}: header is the header line as a regular expression (a str, "
                    f"e.g. header=r'^# file: '), not {type(header).__name__}")


def search(pattern: str, data: Any = None, *, regex: bool = False,
           ignore_case: bool = False, header: str | None = None, doc: Any = None) -> Hits:
    """Lines of ``data`` (default: the run's main variable) containing ``pattern``.

    Each hit is ``{"doc": document name, "line": line number in that document
    (from 1), "text": the line}``; documents are a dict's keys, a list's
    indexes, or the files/records a string is made of
    (:func:`rlm_kernel.context.documents.split_documents`; ``header``: their header
    line as a regular expression); ``doc`` searches one document only.

    Raises:
        NameError: no ``data`` given and the main variable does not exist.
        re.error: ``regex=True`` with an invalid pattern.
        KeyError: ``doc`` names no document.
        TypeError: ``header`` is not a ``str``.
    """
    return search_lines(_data(data), str(pattern), regex=regex, ignore_case=ignore_case,
                        header=_header(header, "search"), doc=doc)


def split_documents(data: Any = None, header: str | None = None) -> dict[Any, str]:
    """``{document name: text}`` of ``data`` (default: the run's main variable);
    ``header`` names the header line as a regular expression; see
    :func:`rlm_kernel.context.documents.split_documents` (``TypeError``: ``header`` is
    not a ``str``)."""
    return _split_documents(_data(data), _header(header, "split_documents"))


def parse_records(data: Any = None, **where: Any) -> Records:
    """The ``Key: value`` records of ``data`` (default: the run's main variable) as
    dicts, those whose fields equal ``where``; see
    :func:`rlm_kernel.context.structure.parse_records`."""
    return _parse_records(_data(data), **where)


def code_outline(data: Any = None, header: str | None = None, **where: Any) -> Outline:
    """Every class, function and method of the Python in ``data`` (default: the
    run's main variable) whose fields equal ``where`` (``doc=`` one document);
    see :func:`rlm_kernel.context.structure.code_outline` (``TypeError``: ``header`` is
    not a ``str``)."""
    return _code_outline(_data(data), _header(header, "code_outline"), **where)


def data_helpers(data_name: str, namespace: Mapping[str, Any] | None
                 ) -> dict[str, DataHelper]:
    """``{name: helper}`` of the four data helpers over ``namespace``'s ``data_name``."""
    return {fn.__name__: DataHelper(fn, data_name, namespace)
            for fn in (search, split_documents, parse_records, code_outline)}
