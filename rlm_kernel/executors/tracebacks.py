"""What of a traceback model code and the user are shown: the model's own frames.

When model code calls one of the REPL's helpers (``search``, ``split_documents``,
``parse_records``, ``code_outline``, ``SHOW_VARS``, ``llm_query``, ``FINAL_VAR`` ...) and
the call fails, the traceback ends at the model's line that made the call: the frames
of this package's own source (``engine/repl_functions.py``, ``context/helpers.py``, the isolated
worker's host-function stubs ...) and whatever they called are cut, and the error type
and message are kept.  A chained exception raised and caught wholly inside the package
(``During handling of the above exception ...``) is not shown either.  Frames of model
code, of the user's tools and of libraries model code called itself are left alone.

Every executor formats model errors through here: the plain ``exec`` executor and the
isolated worker (:func:`format_model_traceback`), and the notebook's shell executor
(:func:`trim_traceback` before IPython formats the error).
"""

from __future__ import annotations

import os
import traceback
from types import TracebackType

__all__ = ["PACKAGE_DIR", "is_framework_file", "trim_traceback", "trim_exception",
           "model_traceback", "format_model_traceback"]

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""The folder of the ``rlm_kernel`` package (with a trailing separator): frames of files
under it are the framework's."""


def is_framework_file(filename: str) -> bool:
    """True when ``filename`` (a code object's ``co_filename``) is a source file of the
    ``rlm_kernel`` package."""
    return os.path.abspath(filename).startswith(PACKAGE_DIR) if filename[:1] != "<" else False


def _is_framework(tb: TracebackType) -> bool:
    return is_framework_file(tb.tb_frame.f_code.co_filename)


def trim_traceback(tb: TracebackType | None) -> TracebackType | None:
    """Cut ``tb`` (changed in place) before the first framework frame that follows a
    frame of other code, so that it ends at the line that called into the framework.

    Leading framework frames (the executor that ran the step) are left: the caller
    skips those.  Returns ``tb``.
    """
    outside, node = False, tb
    while node is not None:
        outside = outside or not _is_framework(node)
        nxt = node.tb_next
        if outside and nxt is not None and _is_framework(nxt):
            node.tb_next = None
            break
        node = nxt
    return tb


def _only_framework(tb: TracebackType | None) -> bool:
    """True when every frame of ``tb`` is the framework's (False for no frame)."""
    if tb is None:
        return False
    node: TracebackType | None = tb
    while node is not None:
        if not _is_framework(node):
            return False
        node = node.tb_next
    return True


def trim_exception(exc: BaseException) -> BaseException:
    """Trim the traceback of ``exc`` and of the exceptions chained to it
    (:func:`trim_traceback`); a chained exception whose frames are all the framework's
    is not shown (``__suppress_context__``, ``__cause__`` dropped).  Returns ``exc``."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        trim_traceback(node.__traceback__)
        chained = node.__cause__ if node.__cause__ is not None else (
            None if node.__suppress_context__ else node.__context__)
        if chained is not None and _only_framework(chained.__traceback__):
            node.__cause__ = None
            node.__suppress_context__ = True
            break
        node = chained
    return exc


def model_traceback(exc: BaseException, filename: str | None = None) -> TracebackType | None:
    """The traceback of ``exc``, trimmed (:func:`trim_exception`), from the first frame
    whose file is ``filename`` (a step's code, e.g. ``<rlm-step-3>``) on; the whole
    trimmed traceback when no frame is that file or ``filename`` is None."""
    tb = trim_exception(exc).__traceback__
    node = tb
    while filename is not None and node is not None \
            and node.tb_frame.f_code.co_filename != filename:
        node = node.tb_next
    return node if node is not None else tb


def format_model_traceback(exc: BaseException, filename: str | None = None) -> str:
    """The text of a model code error as Python prints it, from the step's first frame
    (``filename``) to the model's line that called into the framework; a
    :class:`SyntaxError` as its message and caret alone."""
    if isinstance(exc, SyntaxError):
        return "".join(traceback.format_exception_only(type(exc), exc))
    return "".join(traceback.format_exception(type(exc), exc, model_traceback(exc, filename)))
