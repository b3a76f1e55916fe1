"""A root-model reply as it is written: the ``stream`` option of its call
(:attr:`~rlm_kernel.models.CallOptions.stream`) turned into
:class:`~rlm_kernel.engine.events.ModelWriting` events, at a rate a frontend keeps up
with, and the reply so far kept for a stop that cuts it.

A streamed reply comes one token at a time (20 a second from the embedded model, 100
or more from a provider); a notebook frontend that got a message per token would fall
behind.  :class:`ReplyStream` sends the first piece at once (the cell appears when the
model starts) and then at most one event each :data:`WRITING_INTERVAL` seconds, as
ipykernel's ``OutStream`` batches a cell's output (0.2 s); the last with ``done``.

It also holds the time budget while the model writes: a piece that comes after
``max_seconds`` ran out raises :class:`~rlm_kernel.engine.budget.BudgetExceeded`, which
ends the request (the client closes it, and the server stops generating).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .budget import BudgetExceeded, BudgetGuard
from .events import Event, ModelWriting

__all__ = ["CUT_MARK", "ReplyStream", "WRITING_INTERVAL", "cut_note"]

WRITING_INTERVAL = 0.1
"""Seconds between two ``model_writing`` events of one reply (half ipykernel's 0.2 s
output flush: the text of a reply is what the user waits for)."""

CUT_MARK = "[the model's reply was cut by a stop"
"""How the output of a step whose reply a stop cut begins (:func:`cut_note`)."""


def cut_note(chars: int, reason: str) -> str:
    """The output recorded for a step whose reply was cut: ``[the model's reply was cut
    by a stop after 412 characters (interrupted by the user); its code did not run]``.

    Args:
        chars: characters of the reply written before the stop.
        reason: why the run stopped, in words.
    """
    return f"{CUT_MARK} after {chars} characters ({reason}); its code did not run]"


class ReplyStream:
    """The ``stream`` callback of one root-model call: keeps the reply so far and
    reports it as :class:`~rlm_kernel.engine.events.ModelWriting` events.

    Args:
        step: the step whose reply it is.
        notify: where events go (the run's ``notify``).
        guard: the run's budget guard: its time budget is checked on each piece.
        interval: seconds between two events (default :data:`WRITING_INTERVAL`).
        clock: the monotonic clock (seconds), for tests.
    """

    def __init__(self, step: int, notify: Callable[[Event], None], guard: BudgetGuard, *,
                 interval: float = WRITING_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.step, self._notify, self._guard = step, notify, guard
        self._interval, self._clock = interval, clock
        self._parts: list[str] = []
        self._sent = 0  # parts already reported
        self.pieces = 0
        self.first: float | None = None  # when the first piece came
        self._last = 0.0

    @property
    def text(self) -> str:
        """The reply so far."""
        return "".join(self._parts)

    def __call__(self, piece: str) -> None:
        """Take one piece of the reply; report what is new when the interval passed.

        Raises:
            BudgetExceeded: the run's time budget ran out while the model wrote.
        """
        now = self._clock()
        self._parts.append(piece)
        self.pieces += 1
        if self.first is None:
            self.first = now
        if self._guard.seconds_left() == 0:
            self._guard.check()  # remembers why, and raises
            raise BudgetExceeded("time budget used up")
        if self._sent == 0 or now - self._last >= self._interval:
            self._report(now, done=False)

    def close(self) -> None:
        """The reply is complete: report the rest, with ``done``."""
        self._report(self._clock(), done=True)

    def _report(self, now: float, *, done: bool) -> None:
        if not done and self._sent == len(self._parts):
            return
        new = "".join(self._parts[self._sent:])
        self._sent, self._last = len(self._parts), now
        rate = (self.pieces - 1) / (now - self.first) \
            if self.first is not None and now > self.first and self.pieces > 1 else 0.0
        self._notify(ModelWriting(step=self.step, text=new, reply=self.text,
                                  pieces=self.pieces, tokens_per_second=round(rate, 2),
                                  done=done))
