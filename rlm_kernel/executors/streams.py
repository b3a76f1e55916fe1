"""The stdout/stderr of one step: capped, coalesced, redacted.

A step may print 200,000 lines or one 100 MB string.  :class:`StreamTee`
stands in for ``sys.stdout``/``sys.stderr`` during a step and

* keeps at most ``max_chars`` characters for the trajectory (:data:`MAX_KEPT_CHARS` by
  default), cut as :func:`rlm_kernel.text.middle_cut` cuts: the head and the tail, with
  the one marker between (``[... N characters cut: print less ...]``);
* forwards text to its callback (the live view) coalesced by time, as
  ipykernel's ``OutStream`` does: a chunk :data:`FLUSH_SECONDS` after the
  first write not yet forwarded, plus a final one when the step ends, so one
  ``print`` is one chunk and a flood is a handful; live text also stops at
  ``max_chars`` with a note;
* passes everything through a :class:`~rlm_kernel.executors.redaction.Redactor` first.

The step's record is :meth:`StreamTee.getvalue`, never the live text: the end of a flood
(where a final error or result usually is) is kept even when the live view stopped.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable

from ..text import MAX_KEPT_CHARS, head_room, join_cut
from .redaction import Redactor
from .thread_output import host_thread, is_quarantined

__all__ = ["StreamTee", "OutputCallback", "MAX_KEPT_CHARS", "FLUSH_SECONDS"]

OutputCallback = Callable[[str, str], None]
"""``callback(stream, text)`` with stream ``"stdout"`` or ``"stderr"``."""

FLUSH_SECONDS = 0.1
"""Seconds between two chunks forwarded live (ipykernel's OutStream uses 0.2 s)."""


class StreamTee(io.TextIOBase):
    """A text stream that keeps (capped) what is written and forwards it, coalesced,
    to ``callback(name, text)``.

    Args:
        name: ``"stdout"`` or ``"stderr"``.
        callback: called with coalesced chunks; None keeps text only.
        max_chars: characters kept and forwarded (see the module docstring).
        redact: applied to every chunk kept or forwarded (default: a new
            :class:`Redactor` over the current environment).
        flush_seconds: coalescing window in seconds (0 = forward every write).
    """

    def __init__(self, name: str, callback: OutputCallback | None, *,
                 max_chars: int = MAX_KEPT_CHARS, redact: Redactor | None = None,
                 flush_seconds: float = FLUSH_SECONDS) -> None:
        self.name = name
        self._callback = callback
        self._redact = redact if redact is not None else Redactor()
        self._head_cap = head_room(max_chars)
        self._tail_cap = max_chars - self._head_cap
        # head and tail are kept a secret's length longer than shown, so that a secret
        # across either cut is seen whole and the cut moved off it (see getvalue)
        overlap = self._redact.longest
        self._head_keep = self._head_cap + overlap
        self._tail_keep = self._tail_cap + overlap
        self._max_chars = max_chars
        self._head: list[str] = []
        self._head_len = 0
        self._tail: list[str] = []
        self._tail_len = 0
        self._written = 0
        self._pending: list[str] = []
        self._forwarded = 0
        self._cut_noted = False
        self._flush_seconds = flush_seconds
        self._pending_since = 0.0
        self._timer: threading.Timer | None = None
        self._lock = threading.RLock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        if not text:
            return 0
        if is_quarantined():  # a thread an earlier step left running: not this step's
            return len(text)
        with self._lock:
            self._keep(text)
            if self._callback is not None:
                self._queue(text)
        return len(text)

    def _keep(self, text: str) -> None:
        self._written += len(text)
        room = self._head_keep - self._head_len
        if room > 0:
            self._head.append(text[:room])
            self._head_len += min(room, len(text))
            text = text[room:]
        if text and self._tail_keep:
            if len(text) >= self._tail_keep:  # this chunk alone fills the tail
                self._tail, self._tail_len = [text[-self._tail_keep:]], self._tail_keep
                return
            self._tail.append(text)
            self._tail_len += len(text)
            if self._tail_len > 2 * self._tail_keep:
                joined = "".join(self._tail)[-self._tail_keep:]
                self._tail, self._tail_len = [joined], len(joined)

    def _queue(self, text: str) -> None:
        room = self._max_chars - self._forwarded
        if room <= 0:
            self._note_cut()
            return
        if not self._pending:
            self._pending_since = time.monotonic()
        self._pending.append(text[:room])
        self._forwarded += min(room, len(text))
        if time.monotonic() - self._pending_since >= self._flush_seconds:
            self._forward(final=False)
        elif self._timer is None:
            self._timer = threading.Timer(self._flush_seconds, self._forward, (False,))
            self._timer.name = "rlm-stream-flush"
            self._timer.daemon = True
            host_thread(self._timer)
            self._timer.start()

    def _note_cut(self) -> None:
        """Queue the note that live text stopped at the cap, once."""
        if not self._cut_noted:
            self._cut_noted = True
            self._pending.append(f"\n[output beyond {self._max_chars:,} characters is "
                                 "not shown live]\n")

    def flush(self) -> None:
        """Forward the text written since the last chunk, as one chunk (with the note
        that live text stopped at the cap, if the write that crossed it was the last)."""
        with self._lock:
            if self._callback is not None and self._written > self._max_chars:
                self._note_cut()
            self._forward(final=True)

    def _forward(self, final: bool) -> None:
        """Forward what is pending as one chunk; unless ``final``, the end of it that
        begins a secret value (:meth:`Redactor.partial_at_end`) waits for the next
        chunk, so a secret written in two pieces is redacted whole."""
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if not self._pending or self._callback is None:
                return
            chunk, self._pending = "".join(self._pending), []
            held = 0 if final else self._redact.partial_at_end(chunk)
            if held:
                chunk, self._pending = chunk[:-held], [chunk[-held:]]
                self._pending_since = time.monotonic()
            if chunk:
                self._callback(self.name, self._redact(chunk))

    def close(self) -> None:
        """Forward what is pending; later writes are kept no more (the stream is closed)."""
        self.flush()
        super().close()

    @property
    def overflowed(self) -> bool:
        """True when more than ``max_chars`` characters were written: :meth:`getvalue`
        is then the head, the marker and the tail, and the live text (what the callback
        got) stopped at ``max_chars`` with its note, so the two differ."""
        return self._written > self._max_chars

    def getvalue(self) -> str:
        """What was kept: all of it, or its head, a marker and its tail; redacted."""
        with self._lock:
            head, tail = "".join(self._head), "".join(self._tail)
            if self._written <= self._max_chars:
                return self._redact(head + tail)
            cut = self._redact.outside_secrets
            if len(head) + len(tail) == self._written:  # all of it kept: one text to cut
                text = head + tail
                end = cut(text, self._head_cap)
                start = max(end, cut(text, len(text) - self._tail_cap, later=False))
                head, tail = text[:end], text[start:]
            else:
                head = head[:cut(head, self._head_cap)]
                tail = tail[-self._tail_keep:]
                tail = tail[cut(tail, max(0, len(tail) - self._tail_cap), later=False):]
            dropped = self._written - len(head) - len(tail)
            return join_cut(self._redact(head), dropped, self._redact(tail))
