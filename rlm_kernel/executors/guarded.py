"""A value of model code made text: its own code run under a time limit, whatever it
raises caught.

A value model code made may have a ``__repr__`` that sleeps, loops, raises
``SystemExit`` or returns no string.  The host (an answer's text, a value shown in a
prompt) and the isolated executor's worker (a value that cannot cross as data) both
render such values, with the same two functions: :func:`guarded_render` runs any
renderer under :func:`~rlm_kernel.executors.timeouts.time_limit` and
:func:`~rlm_kernel.executors.host_state.user_interrupts_kept` (the user's own
``SIGINT`` is raised again, never swallowed), and :func:`guarded_repr` is the one
guarded ``repr``: :func:`rlm_kernel.text.short_repr` (bounded to
:data:`~rlm_kernel.text.REPR_CHARS`) within :data:`REPR_SECONDS`.

Imported by the worker process at its start: standard library and this package's
worker-side modules only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ..text import REPR_CHARS, short_repr
from .host_state import user_interrupts_kept
from .timeouts import time_limit

__all__ = ["REPR_SECONDS", "guarded_render", "guarded_repr", "type_name"]

log = logging.getLogger(__name__)

REPR_SECONDS = 1.0
"""Seconds a value's ``repr`` may take: a builtin's repr bounded to
:data:`~rlm_kernel.text.REPR_CHARS` takes microseconds, so a second is only ever used
up by a ``__repr__`` of model code that loops or sleeps; the worker may render several
values for one host call, and each waits this long at most."""


def type_name(value: Any) -> str:
    """The name of ``value``'s type; ``object`` when even that fails (a metaclass of
    model code can make ``__name__`` raise)."""
    try:
        return str(type(value).__name__)
    except BaseException:  # noqa: BLE001 - a metaclass can make even this fail
        return "object"


def guarded_render(render: Callable[[Any], str], value: Any, seconds: float) -> str | None:
    """``render(value)`` under a time limit of ``seconds``; None when it raised anything
    (``SystemExit`` and ``KeyboardInterrupt`` of model code included), ran out of time
    or returned no ``str``.

    Raises:
        KeyboardInterrupt: only the user's own interrupt (``SIGINT``) during it.
    """
    with user_interrupts_kept():
        try:
            with time_limit(seconds):
                text = render(value)
            return text if isinstance(text, str) else None
        except BaseException as exc:  # noqa: BLE001 - the value's code is model code
            try:
                log.debug("rendering a %s with %s failed: %s", type_name(value),
                          getattr(render, "__name__", render), type(exc).__name__)
            except BaseException:  # noqa: BLE001 - even its type name is the model's
                pass
    return None


def guarded_repr(value: Any, *, max_chars: int = REPR_CHARS,
                 seconds: float = REPR_SECONDS) -> str:
    """The one guarded ``repr`` of a value of model code: :func:`rlm_kernel.text.short_repr`
    (at most ``max_chars`` characters, ``...`` where it was shortened) run by
    :func:`guarded_render`; ``<TYPE object>`` when it failed or ran out of time.

    Args:
        value: any object.
        max_chars: characters of the result (default :data:`~rlm_kernel.text.REPR_CHARS`).
        seconds: its time limit.

    Raises:
        KeyboardInterrupt: only the user's own interrupt (``SIGINT``) during it.
    """
    text = guarded_render(lambda v: short_repr(v, max_chars), value, seconds)
    return text if text is not None else f"<{type_name(value)} object>"
