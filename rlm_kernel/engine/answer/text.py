"""A run's answer as text: the one guarded rendering of whatever value ``FINAL`` got.

The answer is kept as the object (``RLMResult.answer_value``); every text made of it
(the result's ``answer``, the answer check's prompt, events, cells, JSON, exports) comes
from :func:`answer_text` or the one guarded repr,
:func:`~rlm_kernel.executors.guarded_repr`.  Both run the value's own code (``__str__``,
``__repr__``, ``__iter__`` ...) under a time limit, catch anything it raises
(``SystemExit`` and ``KeyboardInterrupt`` included: they come from model code, not from
the user), and cap the text's length: :func:`answer_text` falls back to plainer
renderings and cuts the middle (:func:`rlm_kernel.text.middle_cut`).
"""

from __future__ import annotations

import logging
import pprint
from typing import Any

from ...executors import (
    MAX_KEPT_CHARS,
    Redactor,
    guarded_render,
    time_limit,
    type_name,
    user_interrupts_kept,
)
from ...repl_types import REPLVariable
from ...termination import format_final_answer
from ...text import middle_cut, short_repr

__all__ = ["ANSWER_CHARS", "ANSWER_HINT", "RENDER_SECONDS", "answer_text", "describe_variable"]

log = logging.getLogger(__name__)

ANSWER_CHARS = MAX_KEPT_CHARS
"""Characters of an answer's text kept (head and tail, with the one marker of
:func:`rlm_kernel.text.middle_cut`), as for a step's output in the trajectory (100,000)."""
ANSWER_HINT = "the answer's value is kept whole"
"""What the marker of a cut answer text says: the text is cut, the value is not
(``RLMResult.answer_value``, ``rlm_answer`` in a notebook)."""
RENDER_SECONDS = 2.0
"""Seconds one rendering of an answer may take before the next, plainer one is tried."""


def _pretty(value: Any) -> str:
    """``pprint.pformat`` in the value's own order (dict keys not sorted)."""
    return pprint.pformat(value, sort_dicts=False)


def answer_text(value: Any, *, max_chars: int = ANSWER_CHARS,
                seconds: float = RENDER_SECONDS) -> str:
    """The text of an answer of any value.

    Tries, each under ``seconds`` (:func:`~rlm_kernel.executors.guarded_render`):
    :func:`~rlm_kernel.termination.format_final_answer` (a ``str`` as is, a dict as
    JSON, a list line by line, else ``str``), then :func:`pprint.pformat` (dicts with
    tuple keys, values that contain themselves), then the bounded repr of
    :func:`rlm_kernel.text.short_repr`; if all fail, ``<TYPE object>`` (as
    :func:`~rlm_kernel.executors.guarded_repr` says of a value it cannot show).

    Args:
        value: what ``FINAL`` got (or the variable ``FINAL_VAR`` named).
        max_chars: characters kept (head and tail, with the one marker of
            :func:`rlm_kernel.text.middle_cut` between, hint :data:`ANSWER_HINT`).
        seconds: time limit of each attempt.

    Returns:
        The text (raises only the user's own ``KeyboardInterrupt``).
    """
    if type(value) is str:  # the common answer: no code of the value's own to guard
        return middle_cut(value, max_chars, ANSWER_HINT)
    for render in (format_final_answer, _pretty, short_repr):
        text = guarded_render(render, value, seconds)
        if text is not None:
            return middle_cut(text, max_chars, ANSWER_HINT)
    return f"<{type_name(value)} object>"


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
        described: REPLVariable | None = None
        with user_interrupts_kept():
            try:
                with time_limit(seconds):
                    described = REPLVariable.from_value(
                        name, value, preview_length=preview_length)
            except BaseException:  # noqa: BLE001 - the value's code is model code
                pass
        var = described if described is not None else REPLVariable(
            name, type_name(value), preview=f"<{type_name(value)} object>")
    redact = redact if redact is not None else Redactor()
    if redact:
        var.preview = redact(var.preview)
    return var
