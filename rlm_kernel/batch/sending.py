"""What a task's worker sends back: plain data only.

A value model code handed to ``FINAL`` is sent as it is only when :func:`plain_data`
(built-in types, bounded depth); a typed answer of another type is sent as its JSON form
and made that type again by the caller (:func:`typed_again`); anything else as the
answer's text.  A class model code made could run its own code where it is unpickled
(``__reduce__``), or fail to unpickle there, and a value nested too deep does not pickle
at all.  ``rlm batch`` and :meth:`RLM.map <rlm_kernel.engine.RLM.map>` send results by
this rule.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ..engine import RLMResult
from ..engine.frontends import MAX_DEPTH

__all__ = ["MAX_SENT_DEPTH", "plain_data", "sendable", "typed_again"]

log = logging.getLogger(__name__)

MAX_SENT_DEPTH = MAX_DEPTH
"""Levels of containers an answer value sent back may nest: as many as a typed answer
and a value crossing the isolated REPL's wall
(:data:`~rlm_kernel.engine.answer.nesting.MAX_DEPTH`)."""

_MAX_SENT_ITEMS = 1_000_000
_SCALARS = (str, bytes, int, float, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset, dict)


def plain_data(value: Any, limit: int = MAX_SENT_DEPTH) -> bool:
    """Whether ``value`` is built of exact built-in types only (``str``, ``bytes``,
    ``int``, ``float``, ``bool``, ``None``, and ``list``, ``tuple``, ``set``,
    ``frozenset``, ``dict`` of them), at most ``limit`` levels deep and at most a
    million items, walked without recursion: data that unpickles anywhere without
    running code of its own.

    Args:
        value: any object.
        limit: the most levels of containers.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    items = 0
    while stack:
        node, depth = stack.pop()
        items += 1
        kind = type(node)
        if kind in _SCALARS:
            continue
        if kind not in _CONTAINERS or depth > limit or items > _MAX_SENT_ITEMS:
            return False
        parts = [*node.keys(), *node.values()] if kind is dict else list(node)
        stack.extend((part, depth + 1) for part in parts)
    return True


def sendable(result: RLMResult, answer_type: Any = None) -> RLMResult:
    """The result as a worker sends it to its caller: ``answer_value`` kept when it is
    :func:`plain_data`; else, for a typed answer (``answer_type``), its JSON form
    (:meth:`~rlm_kernel.engine.answer.types.AnswerType.to_json`) when that is plain
    data, which :func:`typed_again` makes the type again; else the answer's text.

    Args:
        result: the run's result.
        answer_type: the run's :class:`~rlm_kernel.engine.answer.types.AnswerType`, or
            None.

    Returns:
        ``result`` itself, or a copy with ``answer_value`` replaced.
    """
    value = result.answer_value
    if value is None or plain_data(value):
        return result
    sent: Any = result.answer
    if answer_type is not None:
        try:
            data = answer_type.to_json(value)
        except Exception:  # noqa: BLE001 - no JSON form (AnswerTypeError): its text
            data = None
        if data is not None and plain_data(data):
            sent = data
    log.info("the answer's value (a %s) is not plain data: its %s is sent",
             type(value).__name__, "text" if sent is result.answer else "JSON form")
    return dataclasses.replace(result, answer_value=sent)


def typed_again(result: RLMResult, answer_type: Any) -> RLMResult:
    """``result`` with its ``answer_value`` (plain data, as :func:`sendable` sent it)
    validated as ``answer_type`` again (a dataclass or model of the caller's from its
    JSON form); kept as sent when it does not validate.

    Args:
        result: a result as a worker sent it (changed in place).
        answer_type: the :class:`~rlm_kernel.engine.answer.types.AnswerType` asked for,
            or None (the result as it is).
    """
    if answer_type is None or result.answer_value is None:
        return result
    try:
        result.answer_value = answer_type.validate(result.answer_value)
    except ValueError as exc:  # AnswerTypeError: the data as sent
        log.info("an answer sent back does not validate as %s: %s", answer_type.name, exc)
    return result
