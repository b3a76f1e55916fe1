"""The host's checks of a step's ``FINAL``: the rules an answer passes before a run
ends with it, and the words that say how it was reached.

:class:`~rlm_kernel.engine.run.Run` calls them at three points of a step, one or two
lines each:

1. when the step's ``FINAL`` is taken (:meth:`FinalChecks.take`,
   :meth:`FinalChecks.accept`): a ``FINAL_VAR`` of a missing name fails the step; the
   value's text is redacted; with an answer type (top-level runs) the value is
   validated and coerced, and a value that fails is *refused*: no answer, the step
   fails, and the model is told why and which of its variables hold the type;
2. when the termination policy would stop on it (:meth:`FinalChecks.look_back`): the
   ``FINAL`` may be held for one more step, once per run: the grounding check
   (``ground_answer``, top-level runs) sends back a value no output and no variable
   holds; else ``verify_answer`` asks the model to check the value against the
   question;
3. when the run ends with an answer (:meth:`FinalChecks.source`): how it was reached
   (:func:`~rlm_kernel.engine.answer.sources.answer_source`).

The texts the model reads are :mod:`~rlm_kernel.engine.prompts`'.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...repl_types import REPLHistory
from ..names import user_variables
from ..prompts import (
    answer_type_notice,
    answer_type_refusal,
    check_answer_message,
    grounding_message,
)
from .final import finish_answer, record_value
from .grounding import finding, is_grounded
from .sources import answer_source, any_input_read, read_watch
from .text import answer_text
from .types import AnswerType, AnswerTypeError

if TYPE_CHECKING:  # the step record; step.py imports nothing of this module
    from ..config import RLMConfig
    from ..step import StepOutcome

__all__ = ["FinalChecks", "HeldFinal"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HeldFinal:
    """A ``FINAL`` held for one more step (:meth:`FinalChecks.look_back`).

    Attributes:
        message: the user message the model answers in the next step.
        reason: ``"grounding"`` (no output or variable holds the value) or
            ``"verify"`` (the model checks it against the question).
        finding: the grounding check's sentence (``reason`` ``"grounding"``), else None.
    """

    message: str
    reason: str
    finding: str | None = None


class FinalChecks:
    """The host's checks of one run's ``FINAL`` values.

    Args:
        question: the task, as the model is reminded of it.
        config: the run's settings (``ground_answer``, ``verify_answer``,
            ``max_iterations``).
        answer_type: the answer's type (top-level runs with a typed task), or None.
        top_level: the run is not an ``rlm_query`` child (grounding applies).
        namespace: the REPL namespace (a mapping; read after each step).
        inputs: the protected inputs by name (not offered as holders of the type).
        user_inputs: the names of the user's inputs (variables and tools), for the
            answer's source.
        data_name: the variable the data helpers read when given no data.
        folder: the working folder's helper names (empty without a folder).
        redact: takes secrets out of a text (the run's redactor).
    """

    def __init__(self, question: str, config: RLMConfig, *, answer_type: AnswerType | None,
                 top_level: bool, namespace: Any, inputs: Mapping[str, Any],
                 user_inputs: Collection[str], data_name: str, folder: Collection[str],
                 redact: Callable[[str], str]) -> None:
        self.question, self.config = question, config
        self.answer_type, self.top_level = answer_type, top_level
        self.ns, self.inputs, self.user_inputs = namespace, inputs, user_inputs
        self.data_name, self.folder, self.redact = data_name, tuple(folder), redact

    # -- 1. taking a FINAL ------------------------------------------------------------
    def take(self, outcome: StepOutcome, record: Mapping[str, Any] | None) -> str | None:
        """Make the step's recorded ``FINAL``/``FINAL_VAR`` (if any) ``outcome``'s
        answer (:meth:`accept`).  A ``FINAL_VAR`` of a missing name fails the step
        (``success`` False) and tells the model (``error_for_model``).

        Args:
            outcome: the step's record, updated in place.
            record: the host's record (:class:`~rlm_kernel.engine.answer.final.FinalRecord`),
                or None when the step called no ``FINAL``.

        Returns:
            The note for the step's output and cell when the value is refused, else None.
        """
        if record is None:
            return None
        if record.get("type") == "finish":  # the host made its text: no type to check
            text, diff = finish_answer(record)
            outcome.final, outcome.finished = True, True
            outcome.answer = outcome.answer_value = self.redact(text)
            outcome.diff = None if diff is None else self.redact(diff)
            return None
        value, error = record_value(record, self.ns)
        if error is not None:
            outcome.success, outcome.error_for_model = False, error
            return None
        return self.accept(outcome, value)

    def accept(self, outcome: StepOutcome, value: Any) -> str | None:
        """Make ``value`` ``outcome``'s answer: the value as given (a text with secrets
        redacted) and its text rendered once, guarded and capped
        (:func:`~rlm_kernel.engine.answer.text.answer_text`).

        With an answer type the value is validated and coerced first; a value that
        fails is no answer: the step fails, and the next message tells the model why
        (:func:`~rlm_kernel.engine.prompts.answer_type_refusal`).

        Returns:
            The note for the step's output and cell
            (:func:`~rlm_kernel.engine.prompts.answer_type_notice`) when the value is
            refused, else None (``outcome.final`` is then True).
        """
        if type(value) is str:  # the text answer may hold a secret; other types are data
            value = self.redact(value)
        answer_type = self.answer_type if self.top_level else None
        shown = value
        if answer_type is not None:
            try:
                value = answer_type.validate(value)
                if not isinstance(value, (str, int, float, bool)):
                    shown = answer_type.to_json(value)  # refused if it has no JSON form
                else:
                    shown = value
            except AnswerTypeError as exc:
                problem = self.redact(str(exc))
                log.debug("a FINAL of the wrong type was refused: %s", problem)
                outcome.success = False
                outcome.error_for_model = answer_type_refusal(
                    problem, answer_type.name, self._holders(answer_type, value))
                return answer_type_notice(problem)
        outcome.final, outcome.answer_value = True, value
        outcome.answer = self.redact(answer_text(shown))
        return None

    def _holders(self, answer_type: AnswerType, refused: Any) -> list[str]:
        """The model's variables (not the protected inputs, not the refused value
        itself) that hold a value of ``answer_type``."""
        candidates = {n: v for n, v in user_variables(self.ns).items()
                      if n not in self.inputs and v is not refused}
        return answer_type.holders(candidates)

    # -- 2. one look back -------------------------------------------------------------
    def look_back(self, step: int, outcome: StepOutcome,
                  history: REPLHistory) -> HeldFinal | None:
        """Whether ``step``'s ``FINAL`` is held for one more step; None to accept it.
        Never after the last step (the caller holds at most one per run):

        - ``ground_answer`` (top-level runs): a value typed into ``FINAL`` that no
          output and no variable holds (:func:`~rlm_kernel.engine.answer.grounding.finding`)
          sends the model back to find it with code;
        - else ``verify_answer``: the model checks the answer against the question.

        Args:
            step: the step that called ``FINAL`` (from 1).
            outcome: its record (``final`` True).
            history: the run's trajectory, this step last.
        """
        cfg = self.config
        if step >= cfg.max_iterations or outcome.finished:  # finish() is the folder's end
            return None
        found = None
        if cfg.ground_answer and self.top_level:
            found = finding(outcome.code, outcome.answer_value, self.outputs(history), self.ns)
        if found is not None:
            return HeldFinal(grounding_message(self.question, found, step + 1,
                                               cfg.max_iterations), "grounding", found)
        if not cfg.verify_answer:
            return None
        evidence = outcome.output
        if not evidence.strip() and len(history) >= 2:
            evidence = history.entries[-2].output
        return HeldFinal(check_answer_message(self.question, outcome.answer_value, evidence,
                                              step + 1, cfg.max_iterations), "verify")

    @staticmethod
    def outputs(history: REPLHistory) -> list[str]:
        """What the run's executed code produced so far: each step's output and its
        sub-calls' responses (as kept in the trajectory)."""
        texts = []
        for entry in history.entries:
            texts.append(entry.output)
            texts.extend(str(call.get("response", "")) for call in entry.llm_calls)
        return texts

    # -- 3. how it was reached --------------------------------------------------------
    @property
    def read_watch(self) -> tuple[frozenset[str], frozenset[str]]:
        """What the executor watches for executed reads of the user's inputs
        (:func:`~rlm_kernel.engine.answer.sources.read_watch`)."""
        return read_watch(self.user_inputs, data_name=self.data_name, folder=self.folder)

    def source(self, history: REPLHistory, outcome: StepOutcome | None = None, *,
               forced: bool = False, from_text: bool = False) -> str:
        """How the answer is reached (:func:`~rlm_kernel.engine.answer.sources.answer_source`):
        whether the trajectory's code read one of the user's inputs, and whether the
        grounding check finds ``outcome``'s ``FINAL`` value (None: no ``FINAL`` to check).

        Args:
            history: the run's trajectory.
            outcome: the step whose ``FINAL`` is the answer, or None (a policy's answer).
            forced: the answer came from the "answer now" call.
            from_text: the answer was taken from text, not from an executed ``FINAL``.
        """
        read = any_input_read(history.entries, self.user_inputs,
                              data_name=self.data_name, folder=self.folder)
        ungrounded = outcome is not None and outcome.final and not is_grounded(
            outcome.code, outcome.answer_value, self.outputs(history), self.ns)
        return answer_source(read_input=read, ungrounded=ungrounded, forced=forced,
                             from_text=from_text)
