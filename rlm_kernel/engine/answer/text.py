"""A run's answer as text: the one guarded rendering of whatever value ``FINAL`` got.

The answer is kept as the object (``RLMResult.answer_value``); every text made of it
(the result's ``answer``, the answer check's prompt, events, cells, JSON, exports) comes
from :func:`answer_text` or :func:`value_repr`.  Both run the value's own code
(``__str__``, ``__repr__``, ``__iter__`` ...) under a time limit, catch anything it
raises (``SystemExit`` and ``KeyboardInterrupt`` included: they come from model code, not
from the user), fall back to a plainer rendering, and cap the text's length.
"""

from __future__ import annotations

import logging
import pprint
import reprlib
from collections.abc import Callable
from typing import Any

from ...executors import MAX_KEPT_CHARS, Redactor, dropped_marker, time_limit, user_interrupts_kept
from ...repl_types import REPLVariable
from ...termination import format_final_answer

__all__ = ["ANSWER_CHARS", "RENDER_SECONDS", "answer_text", "describe_variable", "value_repr"]

log = logging.getLogger(__name__)

ANSWER_CHARS = MAX_KEPT_CHARS
"""Characters of an answer's text kept (head and tail, with a marker), as for a step's
output in the trajectory (100,000)."""
RENDER_SECONDS = 2.0
"""Seconds one rendering of a value may take before the next, plainer one is tried."""


def _attempt(render: Callable[[Any], str], value: Any, seconds: float) -> str | None:
    """``render(value)`` under a time limit; None when it raised anything or timed out
    (the user's own interrupt is raised again: :func:`user_interrupts_kept`)."""
    with user_interrupts_kept():
        try:
            with time_limit(seconds):
                text = render(value)
            return text if isinstance(text, str) else None
        except BaseException as exc:  # noqa: BLE001 - the value's code is model code
            try:
                log.debug("rendering a %s with %s failed: %s", type(value).__name__,
                          getattr(render, "__name__", render), type(exc).__name__)
            except BaseException:  # noqa: BLE001 - even its type name is the model's
                pass
    return None


def _cap(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    head = max_chars * 4 // 5
    tail = max_chars - head
    return text[:head] + dropped_marker(len(text) - head - tail) + text[len(text) - tail:]


def _type_name(value: Any) -> str:
    try:
        return str(type(value).__name__)
    except BaseException:  # noqa: BLE001 - a metaclass can make even this fail
        return "object"


def _pretty(value: Any) -> str:
    """``pprint.pformat`` in the value's own order (dict keys not sorted)."""
    return pprint.pformat(value, sort_dicts=False)


def _short_repr(value: Any) -> str:
    """A bounded repr (``reprlib``: long strings, deep and long containers shortened)."""
    short = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
    short.maxstring = short.maxother = 2000
    short.maxlevel = 4
    short.maxlist = short.maxtuple = short.maxset = short.maxfrozenset = 100
    short.maxdict = short.maxdeque = short.maxarray = 100
    return short.repr(value)


def answer_text(value: Any, *, max_chars: int = ANSWER_CHARS,
                seconds: float = RENDER_SECONDS) -> str:
    """The text of an answer of any value.

    Tries, each under ``seconds``: :func:`~rlm_kernel.termination.format_final_answer`
    (a ``str`` as is, a dict as JSON, a list line by line, else ``str``), then
    :func:`pprint.pformat` (dicts with tuple keys, values that contain themselves), then
    a bounded :mod:`reprlib` repr; if all fail, ``<TYPE object: no text>``.

    Args:
        value: what ``FINAL`` got (or the variable ``FINAL_VAR`` named).
        max_chars: characters kept (the first four fifths and the last fifth, with a
            ``[... N characters of output dropped ...]`` marker between).
        seconds: time limit of each attempt.

    Returns:
        The text (raises only the user's own ``KeyboardInterrupt``).
    """
    if type(value) is str:  # the common answer: no code of the value's own to guard
        return _cap(value, max_chars)
    for render in (format_final_answer, _pretty, _short_repr):
        text = _attempt(render, value, seconds)
        if text is not None:
            return _cap(text, max_chars)
    return f"<{_type_name(value)} object: no text>"


def value_repr(value: Any, *, max_chars: int = 300, seconds: float = RENDER_SECONDS) -> str:
    """A short, guarded ``repr`` of ``value`` for a prompt (bounded with :mod:`reprlib`,
    then cut to ``max_chars`` characters with ``...``); raises only the user's own
    ``KeyboardInterrupt``."""
    text = _attempt(_short_repr, value, seconds)
    if text is None:
        return f"<{_type_name(value)} object>"
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


_PLAIN = (str, bytes, int, float, bool, type(None))  # previewed without code of the value's own


def describe_variable(name: str, value: Any, *, preview_length: int = REPLVariable.PREVIEW_LENGTH,
                      seconds: float = RENDER_SECONDS,
                      redact: Redactor | None = None) -> REPLVariable:
    """:meth:`REPLVariable.from_value`, guarded: a value of model code (its ``__str__``,
    ``__len__``, ``shape`` ...) runs under a time limit of ``seconds``, whatever it raises
    is caught (``SystemExit`` and ``KeyboardInterrupt`` included), and the preview has
    secret values redacted.

    Args:
        name: the variable's name.
        value: its value.
        preview_length: characters of the preview (see ``REPLVariable.from_value``).
        seconds: time limit of the description.
        redact: the redactor of the preview (default: a new one over ``os.environ``).

    Returns:
        The description; ``<TYPE object>`` as the preview, length 0, when the value's
        own code failed or ran out of time.

    Raises:
        KeyboardInterrupt: only the user's own interrupt (``SIGINT``) during it.
    """
    if type(value) in _PLAIN:
        var = REPLVariable.from_value(name, value, preview_length=preview_length)
    else:
        var = None
        with user_interrupts_kept():
            try:
                with time_limit(seconds):
                    var = REPLVariable.from_value(name, value, preview_length=preview_length)
            except BaseException:  # noqa: BLE001 - the value's code is model code
                pass
        if var is None:
            var = REPLVariable(name, _type_name(value), preview=f"<{_type_name(value)} object>")
    redact = redact if redact is not None else Redactor()
    if redact:
        var.preview = redact(var.preview)
    return var
