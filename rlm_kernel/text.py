"""The text toolkit: one middle-cut with one marker, and the one bound of a value's repr.

Every text of a run that can be longer than its reader can take is cut the same way:
a step's output kept in the trajectory and shown in the notebook
(:class:`~rlm_kernel.executors.StreamTee`), the output the model reads in its next
prompt, a working-folder helper's result, an answer's text, an earlier task told to the
model of a follow-up, an export.  :func:`middle_cut` (or :class:`HeadTail`, for text
that arrives in pieces) keeps the head and the tail and puts one marker between them,
made by :func:`cut_marker`::

    [... 1,234 characters cut: print less ...]

The marker says how many characters are missing and what to do instead (the ``hint``:
``print less`` unless the caller knows better, e.g. ``grep a narrower pattern``), so the
model learns one sign of a cut and what it asks.  It stands on a line of its own when
the text has lines, and between spaces when it is one line (a question told in one
line stays one line).

A value's ``repr`` is bounded by :func:`short_repr` (:mod:`reprlib`, then
:data:`REPR_CHARS`); the guard that also limits its time and catches what the value's
own code raises is :func:`rlm_kernel.executors.guarded_repr` (a time limit belongs to
the executors' layer, which this module sits below: the spec types use the cut too).

This module imports only the standard library: the worker process of the isolated
executor imports it at every start.
"""

from __future__ import annotations

import reprlib
from typing import Any

__all__ = ["PRINT_LESS", "MAX_KEPT_CHARS", "REPR_CHARS", "cut_marker", "head_room",
           "join_cut", "middle_cut", "HeadTail", "short_repr"]

PRINT_LESS = "print less"
"""The marker's default hint: output is cut because too much was printed."""
MAX_KEPT_CHARS = 100_000
"""Characters of one text kept whole before the middle is cut, where nothing smaller is
asked: each stream of a step in the trajectory and the notebook, an answer's text, a
rich display's text.  About 25,000 tokens: more than any model's view of a step (the
prompt shows ``RLMConfig.max_output_chars``, 3,000 by default), small enough that a
step printing 100 MB leaves a trajectory, a notebook and a JSON line of a sane size."""
REPR_CHARS = 2_000
"""Characters of a value's bounded ``repr`` (:func:`short_repr`): the RLM spec's cap of
a step's output in the history (``REPLEntry.format``, 2,000 characters), so a value is
never shown longer than a step's output is."""
HEAD_SHARE = (2, 3)
"""The head's share of a cut text (numerator, denominator): two thirds.  The start of an
output says what it is (a header, the first hits, the first lines of a file); its end
holds the last lines printed and an error's traceback, which a third keeps.  It is the
share the model's view of a step and the working-folder helpers already used before
this module made one cut of the four (the stream kept three quarters, the answer four
fifths)."""


def cut_marker(cut: int, hint: str = PRINT_LESS) -> str:
    """The one marker of a cut: ``[... 1,234 characters cut: print less ...]``.

    Args:
        cut: characters left out (shown with thousands separators).
        hint: what the reader should do instead (no trailing period).
    """
    return f"[... {cut:,} characters cut: {hint} ...]"


def head_room(limit: int) -> int:
    """Characters of the head of a text cut to ``limit`` characters (the tail gets the
    rest: ``limit - head_room(limit)``); see :data:`HEAD_SHARE`."""
    return limit * HEAD_SHARE[0] // HEAD_SHARE[1]


def join_cut(head: str, cut: int, tail: str, hint: str = PRINT_LESS) -> str:
    """``head``, the marker of ``cut`` characters and ``tail``: the marker on a line of
    its own when the text has lines (``head`` or ``tail`` holds a newline), else between
    spaces.  For callers that pick head and tail themselves (a stream that moves the cut
    off a secret value); others use :func:`middle_cut`."""
    if "\n" not in head and "\n" not in tail:
        return " ".join(part for part in (head, cut_marker(cut, hint), tail) if part)
    lead = "" if head.endswith("\n") or not head else "\n"
    return f"{head}{lead}{cut_marker(cut, hint)}\n{tail}"


def middle_cut(text: str, limit: int = MAX_KEPT_CHARS, hint: str = PRINT_LESS) -> str:
    """``text`` whole if it has at most ``limit`` characters, else its head and tail
    (``limit`` characters in all, :func:`head_room` of them the head) with
    :func:`cut_marker` between; the marker adds about 40 characters.

    Args:
        text: the text.
        limit: characters kept (>= 0).
        hint: what the marker tells the reader to do.

    Raises:
        ValueError: ``limit`` is negative.
    """
    if limit < 0:
        raise ValueError(f"limit is characters kept (>= 0), got {limit}")
    if len(text) <= limit:
        return text
    kept = HeadTail(limit)
    kept.add(text)
    return kept.text(hint)


class HeadTail:
    """The one cut, for text that arrives in pieces (a process's output, the lines of a
    file): kept in memory O(``limit``); :func:`middle_cut` is this over the whole text.

    Args:
        limit: characters kept (>= 0); the head gets :func:`head_room` of them.
    """

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.head_room = head_room(self.limit)
        self.tail_room = self.limit - self.head_room
        self._head: list[str] = []
        self._head_len = 0
        self._tail = ""
        self.total = 0
        """Characters added so far."""

    def add(self, text: str) -> None:
        """Append ``text``."""
        self.total += len(text)
        if self._head_len < self.head_room:
            take = text[: self.head_room - self._head_len]
            self._head.append(take)
            self._head_len += len(take)
            text = text[len(take):]
        if text and self.tail_room:
            self._tail = (self._tail + text)[-self.tail_room:]

    @property
    def cut(self) -> int:
        """Characters added but not kept."""
        return max(0, self.total - self._head_len - len(self._tail))

    def text(self, hint: str = PRINT_LESS) -> str:
        """What was added: whole, or head, marker (with ``hint``) and tail."""
        head = "".join(self._head)
        if not self.cut:
            return head + self._tail
        return join_cut(head, self.cut, self._tail, hint)


def short_repr(value: Any, max_chars: int = REPR_CHARS) -> str:
    """``repr(value)`` bounded by :mod:`reprlib` (strings and objects' reprs longer than
    :data:`REPR_CHARS`, containers deeper than 4 or longer than 100 items, integers of
    more than 200 digits shortened in its manner, with ``...``), then cut to
    ``max_chars`` characters (the end replaced by ``...``: a repr is a preview, read
    whole, not output that asks to print less).  Runs the value's own ``__repr__``
    unguarded: for a value of model code use
    :func:`rlm_kernel.executors.guarded_repr`.

    Args:
        value: any object.
        max_chars: characters of the result (>= 3).
    """
    short = reprlib.Repr()  # Python 3.11's Repr takes no keyword arguments
    short.maxstring = short.maxother = REPR_CHARS
    short.maxlong = 200
    short.maxlevel = 4
    short.maxlist = short.maxtuple = short.maxset = short.maxfrozenset = 100
    short.maxdict = short.maxdeque = short.maxarray = 100
    text = short.repr(value)
    return text if len(text) <= max_chars else text[: max(0, max_chars - 3)] + "..."
