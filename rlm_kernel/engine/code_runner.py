"""A step's code in the run's REPL: split from the model's reply, run under the step's
time limit, and what it left there taken back by the host.

:meth:`CodeRunner.run` turns a reply into a :class:`~rlm_kernel.engine.step.StepOutcome`:
reasoning and code split (:func:`~rlm_kernel.engine.step.split_reply`), the code run by
the executor (its output streamed as ``step_output`` events), the signals
(:data:`~rlm_kernel.engine.step.SIGNAL_NAMES`) and the step's ``FINAL`` taken from the
host's record and checked (:class:`~rlm_kernel.engine.answer.checks.FinalChecks`).
:meth:`CodeRunner.restore_names` puts back what the code rebound
(:meth:`~rlm_kernel.engine.session.namespace.RunNamespace.restore`) and says so.  A
step the executor failed in is recorded as it was (:meth:`CodeRunner.keep_failed`) before
the error goes on to the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..executors import MIN_SECONDS, WorkerError, combined_output
from ..repl_types import REPLResult
from ..termination import detect_final_in_code
from .answer.checks import FinalChecks
from .answer.final import final_from_text
from .budget import BudgetGuard
from .config import RLMConfig
from .events import Event, StepNotice, StepOutput, StepStarted
from .prompts import STEP_INTERRUPTED, restored_note
from .session.namespace import RunNamespace
from .session.task import TaskSpec
from .step import SIGNAL_NAMES, StepOutcome, split_reply

__all__ = ["EXECUTOR_ERRORS", "CodeRunner", "executor_failure"]

EXECUTOR_ERRORS: tuple[type[Exception], ...] = (WorkerError, OSError)
"""Errors of the executor itself, never of model code (whose errors its step reports):
the isolated REPL's worker died and could not be started again, or its sandbox cannot be
built (:class:`~rlm_kernel.executors.sandbox.WorkerError`,
:class:`~rlm_kernel.executors.sandbox.SandboxUnavailable`), or the process ran out of a
resource the executor needs (an ``OSError``: too many open files, no room for a new
process).  Once a run has begun, one of them ends it (``stopped_by`` ``"error"``) and
the result, with the steps so far, is returned: never raised."""


def executor_failure(exc: BaseException) -> str:
    """One readable line for an executor error (:data:`EXECUTOR_ERRORS`): a
    ``WorkerError``'s own message (it says what became of the REPL), else the error's
    type and message."""
    if isinstance(exc, WorkerError):
        return str(exc) or "the isolated REPL failed"
    return f"the REPL failed: {type(exc).__name__}: {exc}"


class CodeRunner:
    """Runs a run's steps' code and takes back what it left.

    Args:
        question: the task (for the ``FINAL`` checks: ``checks``,
            :class:`~rlm_kernel.engine.answer.checks.FinalChecks`).
        config: the run's settings.
        task: the task's terms (answer type, folder).
        space: the run's namespace (:class:`RunNamespace`).
        guard: the run's budget guard (the seconds left bound a step's time).
        top_level: a top-level run (depth 0): its ``FINAL`` values are grounded.
        notify: tells the run's observer an event.
        record: appends a step to the run's trajectory (a step the executor failed in
            is kept).
    """

    def __init__(self, question: str, config: RLMConfig, task: TaskSpec, space: RunNamespace,
                 guard: BudgetGuard, *, top_level: bool, notify: Callable[[Event], None],
                 record: Callable[[int, StepOutcome], None]) -> None:
        self.config, self.space, self.guard = config, space, guard
        self.notify, self.record = notify, record
        folder = task.folder
        self.checks = FinalChecks(  # the host's checks of this run's FINAL values
            question, config, answer_type=task.output_type, top_level=top_level,
            namespace=space.ns, inputs=space.inputs, user_inputs=space.user_inputs,
            data_name=space.functions.data_name,
            folder=folder.functions() if folder is not None else (),
            redact=space.functions.redact)

    def run(self, reply: str, step: int, *, final_only: bool = False) -> StepOutcome:
        """Split ``reply`` into reasoning and code, run the code, and take the step's
        ``FINAL`` (or a FINAL written in prose when the reply has no code).

        Args:
            reply: the model's reply text.
            step: the step's number (from 1).
            final_only: run the code only if it calls FINAL/FINAL_VAR (the last
                "answer now" call).

        Raises:
            KeyboardInterrupt: the user stopped the step (it is recorded, with what it
                printed).
            WorkerError, OSError: the executor failed while the code ran or its
                ``FINAL`` was read (the step is kept: :meth:`keep_failed`).
        """
        reasoning, blocks, kept = split_reply(reply, self.config.cut_after_first_block)
        outcome = StepOutcome(reply=reply, reply_for_history=kept, reasoning=reasoning)
        if not blocks:
            found, value, outcome.error_for_model = final_from_text(reply, self.space.ns)
            if found and (notice := self.checks.accept(outcome, value)) is not None:
                self.notice(outcome, step, notice, "answer_type")
            return outcome
        code = "\n\n".join(blocks)
        if final_only and not detect_final_in_code(code).detected:
            return outcome
        outcome.code = code
        # a step whose executor records reads but gives no result (interrupted, failed)
        # claims none; an executor that records none is read from its code
        executor = self.space.executor
        outcome.names_read = frozenset() if hasattr(executor, "read_watch") else None
        self.notify(StepStarted(step=step, code=code, reasoning=reasoning,
                                answer_now=final_only))
        live: list[str] = []  # what the step showed: kept if the user stops it
        try:
            res = self._execute(code, step, live)
        except KeyboardInterrupt:  # the user's stop: the step is kept, and told finished
            shown = "".join(live).rstrip("\n")
            outcome.output = f"{shown}\n{STEP_INTERRUPTED}".lstrip("\n")
            outcome.success = False
            self.record(step, outcome)
            raise
        except EXECUTOR_ERRORS as exc:
            self.keep_failed(outcome, step, exc, "".join(live))
            raise
        outcome.output, outcome.success = combined_output(res), res.success
        outcome.seconds, outcome.llm_calls = res.execution_time, res.llm_calls
        outcome.names_read = res.names_read
        try:
            outcome.signals = self._take_signals()
            if (notice := self.checks.take(outcome, self.space.functions.take_final())) \
                    is not None:
                self.notice(outcome, step, notice, "answer_type")
        except EXECUTOR_ERRORS as exc:
            self.keep_failed(outcome, step, exc)
            raise
        return outcome

    def keep_failed(self, outcome: StepOutcome, step: int, exc: BaseException,
                    shown: str | None = None) -> None:
        """Record ``step`` as failed by its executor: its output (``shown``: what it
        printed live; else the outcome's) and the failure's line, so the trajectory
        keeps the step that broke the REPL."""
        text = (outcome.output if shown is None else shown).rstrip("\n")
        outcome.output = f"{text}\n{executor_failure(exc)}".lstrip("\n")
        outcome.success = False
        self.record(step, outcome)

    def restore_names(self, outcome: StepOutcome, step: int) -> None:
        """Put back the reserved names, protected inputs and the user's tools the step's
        code rebound, deleted or changed in place (:meth:`RunNamespace.restore`), and
        say so in the step's output and cell (:meth:`notice`).

        Raises:
            WorkerError, OSError: the executor failed (the step is kept:
                :meth:`keep_failed`).
        """
        try:
            if (note := restored_note(*self.space.restore())) is not None:
                self.notice(outcome, step, note, "restored")
        except EXECUTOR_ERRORS as exc:
            self.keep_failed(outcome, step, exc)
            raise

    def notice(self, outcome: StepOutcome, step: int, text: str, reason: str) -> None:
        """A note of the host's about ``step`` (an input put back, an answer refused):
        appended to the step's output, which the model reads, and told to the
        observer (``step_notice``) for the step's cell."""
        outcome.output = "\n".join([outcome.output.rstrip(), text]).lstrip()
        self.notify(StepNotice(step=step, text=text, reason=reason))

    def _execute(self, code: str, step: int, live: list[str]) -> REPLResult:
        """Run a step's code under its time limit (``step_timeout``, cut to the seconds
        left of ``max_seconds``: the time budget holds inside a step, and the next
        model call ends the run), streaming ``step_output`` events (and into ``live``);
        the result's ``llm_calls`` are the sub-calls that returned while it ran."""

        def on_output(stream: str, text: str) -> None:
            live.append(text)
            self.notify(StepOutput(step=step, stream=stream, text=text))

        functions, executor = self.space.functions, self.space.executor
        functions.take_final()  # a FINAL left over from outside this step does not count
        calls: list[dict[str, Any]] = []  # this step's llm_query records
        functions.step_calls, functions.step = calls, step
        timeout, left = self.config.step_timeout, self.guard.seconds_left()
        if left is not None:
            timeout = max(left, MIN_SECONDS) if timeout is None else \
                max(min(timeout, left), MIN_SECONDS)
        watching = hasattr(executor, "read_watch")  # executed reads recorded
        previous = getattr(executor, "read_watch", None)
        if watching:
            executor.read_watch = self.checks.read_watch  # type: ignore[attr-defined]
        try:
            res = executor.execute(code, timeout=timeout, on_output=on_output)
        finally:
            if watching:  # a child run's step inside its parent's
                executor.read_watch = previous  # type: ignore[attr-defined]
        res.llm_calls = list(calls)
        return res

    def _take_signals(self) -> dict[str, float]:
        """Remove the :data:`~rlm_kernel.engine.step.SIGNAL_NAMES` variables from the
        namespace; their numbers by key (exact ``int``/``float`` only: a subclass's
        ``__float__`` would be model code running on the host)."""
        signals: dict[str, float] = {}
        for name, key in SIGNAL_NAMES.items():
            value = self.space.ns.pop(name, None)
            if type(value) in (int, float):
                signals[key] = float(value)
        return signals
