"""How a run's end is shown: in words and in a tone, read from the engine's one table.

Every view of a finished run (the progress bar in the task cell, the answer cell the
JupyterLab extension adds, the inline fallback) says the same thing the same way, as
:func:`~rlm_kernel.engine.answer.sources.run_ending` gives it (the table the command
line and the export read too):

- an answer computed by the model's code from the user's data (``answer_source``
  ``data``, at a ``FINAL``) is a plain success (tone ``ok``, green): ``The answer was
  computed by the model's code from your data.``;
- any other answer is shown for what it is (``caution``, amber) with its kind's words
  (``The answer was reached without reading your data.``; a vote says how many
  candidates agreed);
- a stop without an answer is amber too (a step limit, a budget, an interrupt, a run
  that was stuck: ``No answer: you interrupted the run.``), except a real error
  (``stopped_by`` ``error``), the only red end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..engine.frontends import STOP_REASONS, TONES, RunEnding, run_ending

if TYPE_CHECKING:
    from ..engine import RLMResult

__all__ = ["answer_note", "end_style", "ending_of", "stop_text"]


def ending_of(result: RLMResult, no_data: bool | None = None) -> RunEnding:
    """How ``result`` (an ``RLMResult``) ended: kind, tone and sentence
    (:func:`~rlm_kernel.engine.answer.sources.run_ending`).

    Args:
        result: the run's ``RLMResult``.
        no_data: the run had no variable, tool or folder at all (``RunStarted.no_data``);
            None: read from the result (no variables shown to the model).
    """
    if no_data is None:
        no_data = not getattr(result, "variables", True)
    return run_ending(result.answer is not None, result.stopped_by,
                      getattr(result, "answer_source", None), getattr(result, "votes", None),
                      no_data=no_data)


def answer_note(answer: str | None, answer_source: str | None,
                votes: tuple[int, int] | None = None, stopped_by: str = "final") -> str | None:
    """The sentence that says how ``answer`` was reached when it is not a plain
    success, or None: no answer, or an answer from the user's data at a ``FINAL``
    (or from a result that does not say how).

    Args:
        answer: the run's answer as text (None: no answer).
        answer_source: a key of ``ANSWER_SOURCE_KINDS`` (an unknown key is shown as
            it is).
        votes: after a vote, ``(k, n)`` (k of n candidates agreed), else None.
        stopped_by: the run's stop reason.

    Returns:
        e.g. ``"The answer was chosen by a vote: 2 of 3 candidates agreed."``.
    """
    if answer is None:
        return None
    end = run_ending(True, stopped_by, answer_source,
                     votes if isinstance(votes, list | tuple) and len(votes) == 2 else None)
    return None if end.tone == "ok" else end.words


def end_style(answer: str | None, stopped_by: str, answer_source: str | None) -> str:
    """The colour of a run's end, as ipywidgets names bar styles (the tone's
    ``widget`` in :data:`~rlm_kernel.engine.answer.sources.TONES`).

    Returns:
        ``"success"`` (green) for an answer from the user's data at a ``FINAL``
        (``answer_source`` ``data``, or None: not told); ``"danger"`` (red) for an
        error that left no answer; ``"warning"`` (amber) for everything else.
    """
    return TONES[run_ending(answer is not None, stopped_by, answer_source).tone]["widget"]


def stop_text(stopped_by: str, error: str | None = None) -> str:
    """How the run ended, in one phrase: ``"finished: final"``, or ``"stopped: stuck
    (the model repeated itself) — step 4 repeats step 2"`` (the meaning of the reason,
    then ``error``: the reason's details, when there are any)."""
    if stopped_by == "final":
        return f"finished: final — {error}" if error else "finished: final"
    stop = STOP_REASONS.get(stopped_by)
    text = f"stopped: {stopped_by}" + (f" ({stop.meaning})" if stop else "")
    return f"{text} — {error}" if error else text
