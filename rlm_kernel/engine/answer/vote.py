"""Agreement among candidate answers: answers normalised to comparable keys, and the
vote that picks one candidate.

The vote is self-consistency's majority over final answers (Wang et al., 2023,
"Self-Consistency Improves Chain of Thought Reasoning in Language Models", ICLR 2023,
arXiv:2203.11171), over whole RLM trajectories; the tie-break by the trajectory's own
evidence (failed steps, then the confidence the code stated) follows the uncertainty
signals of self-reflective program search (Alizadeh-Vahid et al., 2026, "Recursive
Language Models Meet Uncertainty: The Surprising Effectiveness of Self-Reflective
Program Search for Long Context", SRLM, arXiv:2603.15653).

:func:`answer_key` turns an answer into a hashable key so that equal answers in
different dress count as one:

- numbers: ``42 == 42.0 == "42" == "42.0"``, ``"1,234" == 1234``; floats are compared
  at 12 significant digits (``0.1 + 0.2 == 0.3``); integers exactly;
- text: case-folded, white space collapsed, surrounding quotes and a trailing period
  stripped (``'"Paris".' == "paris"``); ``yes``/``true`` and ``no``/``false`` equal
  the bools ``True`` / ``False``;
- ``list``, ``tuple``, ``set``, ``frozenset``: the sorted normalised members (order does
  not count, repeats do); ``dict``: its normalised items;
- ``None``, or text that is empty once normalised: no answer, no vote;
- any other type (a subclass too, numpy or pandas values ...): its guarded text
  (:func:`~rlm_kernel.engine.answer.text.answer_text`), normalised as text.  No code of the
  value's own runs here but through that guarded rendering: answers are model-made
  objects.

:func:`tally` counts the keys of finished candidates (:class:`Ballot`), picks the
winning answer and the candidate that stands for it; :meth:`Tally.decided` tells
whether candidates not yet run could still change the winner.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .text import answer_text

__all__ = ["Ballot", "Tally", "answer_key", "evidence_rank", "tally"]

log = logging.getLogger(__name__)

Key = tuple[Any, ...]
"""A normalised answer: ``("num", 42)``, ``("bool", True)``, ``("text", "paris")``,
``("seq", (...))``, ``("map", ((k, v), ...))``, ``("none",)`` (a None member)."""

MAX_MEMBERS = 100_000
"""Members of a container normalised one by one; a bigger one is compared by text."""
MAX_DEPTH = 20
"""Container nesting followed; deeper values are compared by text."""
SIGNIFICANT_DIGITS = 12
"""Significant digits at which floats are compared."""

_QUOTES = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "«": "»"}
_TRUE, _FALSE = frozenset({"yes", "true"}), frozenset({"no", "false"})
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d+)?")  # 1,234 / 12,345.5


def answer_key(value: Any, text: str | None = None) -> Key | None:
    """The normalised key of an answer, or None when it casts no vote.

    Args:
        value: the answer as ``FINAL`` got it (``RLMResult.answer_value``).
        text: its rendered text (``RLMResult.answer``), used for values of other
            types than the builtins listed in the module docstring (None: rendered
            here, guarded).

    Returns:
        A hashable key (equal keys are the same answer), or None for no answer
        (``None``, or text empty once normalised).  Never raises.
    """
    if value is None:
        return None
    try:
        key = _key(value, 0, text)
    except RecursionError:  # pragma: no cover - MAX_DEPTH keeps well below the limit
        key = _text_key(text if text is not None else answer_text(value))
    return None if key == ("text", "") else key


def _key(value: Any, depth: int, text: str | None = None) -> Key:
    """The key of ``value`` (exact builtin types only; see the module docstring)."""
    kind = type(value)
    if value is None:
        return ("none",)
    if kind is bool:
        return ("bool", value)
    if kind is int:
        return ("num", value)
    if kind is float:
        return _float_key(value)
    if kind is str:
        return _text_key(value)
    if kind in (list, tuple, set, frozenset) and depth < MAX_DEPTH \
            and len(value) <= MAX_MEMBERS:
        members = [_key(v, depth + 1) for v in value]
        return ("seq", tuple(sorted(members, key=repr)))
    if kind is dict and depth < MAX_DEPTH and len(value) <= MAX_MEMBERS:
        items = [(_key(k, depth + 1), _key(v, depth + 1)) for k, v in value.items()]
        return ("map", tuple(sorted(items, key=repr)))
    return _text_key(text if text is not None and depth == 0 else answer_text(value))


def _float_key(value: float) -> Key:
    """A float at :data:`SIGNIFICANT_DIGITS` digits; an integral one as an int."""
    if math.isnan(value):
        return ("text", "nan")
    if math.isinf(value):
        return ("num", value)
    rounded = float(f"{value:.{SIGNIFICANT_DIGITS}g}")
    return ("num", int(rounded) if rounded.is_integer() else rounded)


def _text_key(text: str) -> Key:
    """Text without case, extra white space, surrounding quotes or a trailing period;
    a number or a yes/no in it becomes that number or bool."""
    t = " ".join(text.split())
    while True:
        before = t
        if t.endswith("."):
            t = t[:-1].rstrip()
        if len(t) >= 2 and _QUOTES.get(t[0]) == t[-1]:
            t = t[1:-1].strip()
        if t == before:
            break
    t = t.casefold()
    if t in _TRUE or t in _FALSE:
        return ("bool", t in _TRUE)
    number = _number(t)
    return number if number is not None else ("text", t)


def _number(t: str) -> Key | None:
    """The key of a number written as text (``42``, ``-3.5``, ``1e3``, ``1,234``)."""
    if _GROUPED.fullmatch(t):
        t = t.replace(",", "")
    elif not _NUMBER.fullmatch(t):
        return None
    if re.fullmatch(r"[+-]?\d+", t):
        return ("num", int(t))
    try:
        return _float_key(float(t))
    except (ValueError, OverflowError):  # pragma: no cover - the pattern allows floats
        return None


@dataclass(frozen=True)
class Ballot:
    """One finished candidate as the vote sees it.

    Attributes:
        index: the candidate's number, from 1 (earlier wins a tie of evidence).
        key: its answer's :func:`answer_key` (None: no answer, no vote).
        failed_steps: steps whose code failed or that ran no code (fewer is better).
        confidence: the last ``RLM_CONFIDENCE`` its code stated (higher is better;
            None ranks below any number).
    """

    index: int
    key: Hashable | None
    failed_steps: int = 0
    confidence: float | None = None


def evidence_rank(ballot: Ballot) -> tuple[int, float, int]:
    """Sort key of a ballot by its evidence, best first: fewer failed steps, then
    higher stated confidence, then the earlier candidate."""
    confidence = ballot.confidence if ballot.confidence is not None else -math.inf
    return (ballot.failed_steps, -confidence, ballot.index)


@dataclass(frozen=True)
class Tally:
    """The vote over the candidates finished so far.

    Attributes:
        counts: answer key -> votes.
        winner: the winning key (most votes; a tie goes to the answer whose best
            candidate has the best :func:`evidence_rank`), or None when no candidate
            answered.
        chosen: the candidate (1-based) whose trajectory stands for the result: the
            winner's candidate with the best evidence, or, when none answered, the
            candidate with the best evidence of all; None when no ballots.
        finished: how many candidates voted or abstained.
    """

    counts: dict[Hashable, int] = field(default_factory=dict)
    winner: Hashable | None = None
    chosen: int | None = None
    finished: int = 0

    def votes(self, key: Hashable | None) -> int:
        """Votes of the answer ``key`` (0 for None: no answer)."""
        return 0 if key is None else self.counts.get(key, 0)

    def decided(self, total: int) -> bool:
        """True when the candidates not yet run (``total - finished``) could not change
        the winner even if all gave the runner-up's answer (or one answer of their own):
        the leader has more votes than the runner-up plus all of them."""
        if self.winner is None:
            return False
        leading = self.counts[self.winner]
        runner_up = max((n for k, n in self.counts.items() if k != self.winner), default=0)
        return leading > runner_up + max(0, total - self.finished)


def tally(ballots: Sequence[Ballot]) -> Tally:
    """Count ``ballots`` and pick the winner and the chosen candidate (see :class:`Tally`)."""
    counts: dict[Hashable, int] = {}
    best: dict[Hashable, Ballot] = {}  # answer -> its candidate with the best evidence
    for ballot in ballots:
        if ballot.key is None:
            continue
        counts[ballot.key] = counts.get(ballot.key, 0) + 1
        if ballot.key not in best or evidence_rank(ballot) < evidence_rank(best[ballot.key]):
            best[ballot.key] = ballot
    if counts:
        top = max(counts.values())
        leaders = [best[k] for k, n in counts.items() if n == top]
        chosen_ballot = min(leaders, key=evidence_rank)
        return Tally(counts, chosen_ballot.key, chosen_ballot.index, len(ballots))
    if ballots:
        return Tally({}, None, min(ballots, key=evidence_rank).index, len(ballots))
    return Tally()
