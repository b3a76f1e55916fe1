"""How a run's end is shown: the answer's kind in words and the colour of the end.

Every view of a finished run (the progress bar in the task cell, the answer cell the
JupyterLab extension adds, the inline fallback) says the same thing the same way:

- an answer computed from the user's data (``answer_source`` ``data``) is a plain
  success (``success``, green);
- any other answer is shown for what it is (``warning``, amber) with its kind's
  notebook sentence (:data:`~rlm_kernel.engine.answer.sources.ANSWER_SOURCE_KINDS`, the
  table the command line and the export read too: ``Answer: reached without reading
  any data the user gave``; a vote says how many candidates agreed);
- a stop without an answer is amber too (a step limit, a budget, an interrupt, a run
  that was stuck), except a real error (``stopped_by`` ``error``), the only red end.
"""

from __future__ import annotations

from typing import Any

from ..engine import ANSWER_SOURCES, is_plain

__all__ = ["STOP_WORDS", "answer_note", "end_style", "stop_text"]

STOP_WORDS = {
    "max_iterations": "the step limit",
    "interrupt": "you interrupted it",
    "stuck": "the model repeated itself",
}
"""What a stop reason means, where its name alone does not say it."""


def answer_note(answer: str | None, answer_source: str | None,
                votes: Any = None) -> str | None:
    """The sentence that says how ``answer`` was reached, or None when there is
    nothing to add: no answer, an answer from the user's data (``data``), or an
    unknown kind (``None``: a result from before answers said how).

    Args:
        answer: the run's answer as text (None: no answer).
        answer_source: a key of :data:`ANSWER_SOURCES` (an unknown key is shown as
            it is).
        votes: after a vote, ``(k, n)`` (k of n candidates agreed), else None.

    Returns:
        e.g. ``"Answer: chosen by a vote of candidates (2 of 3 agreed)"``.
    """
    if answer is None or is_plain(answer_source):
        return None
    sentence = ANSWER_SOURCES.get(answer_source, answer_source)
    if answer_source == "vote" and isinstance(votes, list | tuple) and len(votes) == 2:
        sentence += f" ({votes[0]} of {votes[1]} agreed)"
    return f"Answer: {sentence}"


def end_style(answer: str | None, stopped_by: str, answer_source: str | None) -> str:
    """The colour of a run's end, as ipywidgets names bar styles.

    Returns:
        ``"success"`` (green) for an answer from the user's data at a ``FINAL``
        (``answer_source`` ``data``, or None: not told); ``"danger"`` (red) for an
        error that left no answer; ``"warning"`` (amber) for everything else.
    """
    if answer is not None:
        return "success" if stopped_by == "final" and is_plain(answer_source) else "warning"
    return "danger" if stopped_by == "error" else "warning"


def stop_text(stopped_by: str, error: str | None = None) -> str:
    """How the run ended, in one phrase: ``"finished: final"``, or ``"stopped: stuck
    (the model repeated itself) — step 4 repeats step 2"`` (the meaning of the reason,
    then ``error``: the reason's details, when there are any)."""
    word = "finished" if stopped_by == "final" else "stopped"
    meaning = STOP_WORDS.get(stopped_by)
    text = f"{word}: {stopped_by}" + (f" ({meaning})" if meaning else "")
    return f"{text} — {error}" if error else text
