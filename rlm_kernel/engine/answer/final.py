"""The record of a ``FINAL``: what the host keeps when model code calls ``FINAL`` or
``FINAL_VAR``, what a ``FINAL`` written in prose gives, and the value a record names.

A ``FINAL`` is recorded once, host-side (:class:`FinalRecord`, held by the REPL
functions of a run), when it is called: model code that catches the
:class:`~rlm_kernel.termination.FinalOutput` exception does not lose it.  The run takes
the record after the step (:meth:`FinalRecord.take`), resolves it to a value
(:func:`record_value`) and hands the value to the host's checks
(:mod:`~rlm_kernel.engine.answer.checks`).  A reply without code may still write a
``FINAL`` in prose (:func:`final_from_text`, the termination spec's text fallback).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import Any

from ...executors import is_quarantined
from ...termination import detect_final_in_text, resolve_final_var
from ..prompts import final_var_failed

__all__ = ["FinalRecord", "final_from_text", "finish_answer", "record_value"]

log = logging.getLogger(__name__)

_IDENT = re.compile(r"^[A-Za-z_]\w*$")


class FinalRecord:
    """The first ``FINAL``/``FINAL_VAR`` of the current step, kept host-side.

    The record is what :class:`~rlm_kernel.termination.FinalOutput` carries:
    ``{"type": "direct", "answer": value}`` for ``FINAL(value)`` or
    ``{"type": "variable", "var": name}`` for ``FINAL_VAR(name)``.  Thread-safe: a
    ``FINAL`` may be called from a thread of model code (``llm_query_batched``'s pool,
    a thread the step started).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._output: dict[str, Any] | None = None

    def keep(self, output: dict[str, Any]) -> None:
        """Keep ``output`` (a ``FinalOutput``'s record) when it is the step's first.
        One from a thread an earlier step left running (a timer firing later) is not
        the current step's and is dropped."""
        if is_quarantined():
            log.debug("a FINAL from a thread of an earlier step was dropped")
            return
        with self._lock:
            if self._output is None:
                self._output = output

    def take(self) -> dict[str, Any] | None:
        """The first record kept since the last call (then forgotten), or None."""
        with self._lock:
            output, self._output = self._output, None
        return output


def record_value(record: Mapping[str, Any], namespace: Any) -> tuple[Any, str | None]:
    """The value a ``FINAL`` record names: ``(value, None)``, or ``(None, message)``
    when ``FINAL_VAR`` named no variable of ``namespace`` (the message is what the model
    is told: :func:`~rlm_kernel.engine.prompts.final_var_failed`).

    Args:
        record: a :class:`FinalRecord` entry (``type`` ``"direct"`` with ``answer``,
            or ``"variable"`` with ``var``).
        namespace: the REPL namespace after the step (a mapping).
    """
    if record.get("type") != "variable":
        return record.get("answer"), None
    try:
        return resolve_final_var(record["var"], namespace), None
    except KeyError as exc:
        return None, final_var_failed(str(exc.args[0]))


def finish_answer(record: Mapping[str, Any]) -> tuple[str, str | None]:
    """The answer of a ``finish()`` record
    (:meth:`~rlm_kernel.engine.repl_functions.REPLFunctions.finish`): ``(text, diff)``.
    The text is the message, a blank line, then the diff (or a note: the folder did not
    change; no diff could be computed, and why); ``diff`` is the diff alone (``""``: no
    change), or None when it could not be computed."""
    message, diff = record.get("message"), record.get("diff")
    if diff is None:
        problem = record.get("problem") or "no diff could be computed"
        tail = f"(no diff of the working folder: {problem})"
    else:
        tail = diff if diff.strip() else "(the working folder did not change)"
    text = f"{message.rstrip()}\n\n{tail}" if isinstance(message, str) and message.strip() \
        else tail
    return text, diff


def final_from_text(reply: str, ns: Any) -> tuple[bool, Any, str | None]:
    """A ``FINAL`` written in prose (a reply without code): ``(found, value, error)``.

    Accepted only when it cannot be a placeholder: a quoted literal
    (``FINAL("Paris")``), or a name that exists in the REPL (``FINAL(answer)``,
    ``FINAL_VAR(answer)``).  ``error`` is the termination spec's message for a
    ``FINAL_VAR`` of a missing name (``found`` False), else None.

    Args:
        reply: the model's reply text.
        ns: the REPL namespace (a mapping).
    """
    det = detect_final_in_text(reply)
    if not det.detected or det.content is None:
        return False, None, None
    if det.final_type == "variable":
        try:
            return True, resolve_final_var(det.content, ns), None
        except KeyError as exc:
            return False, None, str(exc.args[0])
    raw = det.raw_match or ""
    inner = raw[raw.find("(") + 1:].strip()
    if inner[:1] in "\"'":
        return True, det.content, None
    if _IDENT.match(det.content) and det.content in ns:
        return True, ns[det.content], None
    return False, None, None
