"""One run of the RLM loop, top to bottom, in one object.

:class:`Run` owns a run's state (the conversation, the trajectory, the held answer),
its settings, its services' clients, the functions its code calls and the replay
record it is checked against.  A step reads in order::

    execute()                       the run; errors end it with a stopped_by reason
      _loop()                       steps until an answer, a limit or repeated failures
        _step(n)
          _ask(n)                   messages -> the root model's reply (a reply that
                                    repeats an earlier step's code is shown so and
                                    sampled again, once per run)
          _run_code(reply, n)       reasoning and code split; code executed; the
                                    step's FINAL taken from the host's record and
                                    checked (_take_answer: engine.answer.checks)
          _restore_names(outcome)   reserved names, protected inputs and tools put
                                    back (_notice: in the output and the step's cell)
          _check_repetition(n, o)   the same code, output or error as an earlier step
                                    (engine.repetition): the first time, the model is
                                    told and its next step sampled differently; the
                                    next time the run is stuck
          _record(n, outcome)       history entry, replay divergence, step_finished
        _judge(n, outcome)          the termination policy says whether to stop;
                                    a FINAL may be held for one look back
                                    (_look_back: the grounding check, the answer
                                    check); else the next user message
      _answer_now()                 after max_iterations, or when stuck
                                    (_stop_stuck): one last call for FINAL

The answer has one path: ``FINAL``/``FINAL_VAR`` record it host-side
(:class:`~rlm_kernel.engine.answer.final.FinalRecord`, held by the run's REPL functions:
:mod:`~rlm_kernel.engine.repl_functions`) when called (model code catching the exception
does not lose it); :meth:`Run._run_code` takes that record and hands it to the
host's checks (:class:`~rlm_kernel.engine.answer.checks.FinalChecks`: resolved to the
value, its type checked, its text rendered once; later the look back and the answer's
source).  The policy decides *whether* to stop, never what a FINAL's answer is.

What the task asks beyond its question (the answer's type, the earlier tasks of the
conversation, the user's tools, which inputs are protected) is a
:class:`~rlm_kernel.engine.session.task.TaskSpec`, read when the task message is written, when a
FINAL is taken and when names are put back.

Imports nothing from Jupyter; :class:`~rlm_kernel.engine.rlm.RLM` builds the clients
and starts runs (and child runs) through :meth:`Run.execute`.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Callable, MutableMapping
from dataclasses import replace
from functools import cached_property
from typing import Any

from ..executors import (
    MIN_SECONDS,
    Executor,
    SupportsDescribe,
    WorkerError,
    combined_output,
    run_deadline,
    variable_ids,
)
from ..models import LanguageModel, LLMError, tracing
from ..policies import ActionResult, PolicyContext, PolicyRegistry
from ..redaction import redact_text
from ..repl_types import REPLResult, REPLVariable
from ..termination import detect_final_in_code
from .answer.checks import FinalChecks
from .answer.final import final_from_text
from .answer.text import describe_variable
from .budget import BudgetExceeded
from .config import RLMConfig
from .events import (
    AnswerCheck,
    Event,
    ModelCall,
    RunFinished,
    RunStarted,
    StepFinished,
    StepNotice,
    StepOutput,
    StepStarted,
    emit,
    usage_totals,
)
from .prompts import (
    STEP_INTERRUPTED,
    answer_now_message,
    build_messages,
    next_message,
    question_with_type,
    repeated_step,
    repetition_message,
    restored_note,
    stuck_message,
    task_message,
)
from .repetition import Repetition, RepetitionDetector, signature
from .repl_functions import RESERVED_NAMES, SESSION_NAMES, REPLFunctions, user_variables
from .replay.resume import Continuation, recorded_reply
from .result import RLMResult
from .services import RunServices
from .session.conversation import HISTORY_NAME
from .session.task import TaskSpec, describe_tool
from .session.user_tools import LentTools
from .step import (
    SIGNAL_NAMES,
    TRACEBACK_LINE,
    StepOutcome,
    model_words,
    split_reply,
    writes_final,
)

__all__ = ["EXECUTOR_ERRORS", "Run", "end_by_executor_error", "executor_failure",
           "reply_text"]

log = logging.getLogger(__name__)

_MISSING = object()

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


def end_by_executor_error(result: RLMResult, exc: BaseException, *,
                          after_run: bool = False) -> None:
    """End ``result``'s run on an executor error: ``stopped_by`` ``"error"`` and the
    error's line (:func:`executor_failure`, redacted) in ``error``; the trajectory and
    an accepted answer are kept.

    Args:
        result: the run's result.
        exc: the executor's error.
        after_run: the error came after the run had ended (its clean-up: the variables
            it made cannot be listed): a run that already ended with an error keeps
            that first error; another ending's error text (a budget's) is kept before
            this one's.
    """
    text = redact_text(executor_failure(exc))
    log.warning("the run's REPL failed%s: %s", " after the run" if after_run else "", text,
                exc_info=not isinstance(exc, WorkerError))  # an OSError: where it came from
    if not after_run:
        result.stopped_by, result.error = "error", text
        return
    if result.stopped_by == "error" and result.error:
        return
    text = f"after the run, {text} (the variables it made are not listed)"
    result.error = f"{result.error}; {text}" if result.error else text
    result.stopped_by = "error"


def reply_text(client: LanguageModel, messages: list[dict[str, str]], **kwargs: Any) -> str:
    """The text of one root-model call.

    Raises:
        LLMError: the client failed in any way (its own exception type and message
            are kept in the text) or returned no text.
    """
    try:
        text = client.complete(messages, **kwargs).text
    except (LLMError, KeyboardInterrupt, BudgetExceeded):
        raise
    except Exception as exc:  # noqa: BLE001 - a client is third-party code
        raise LLMError(f"the model client failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(text, str):
        raise LLMError(f"the model returned no text (got {type(text).__name__})")
    return text


class Run:
    """One run (or child run) of the loop: its state, settings, clients and the REPL
    functions its code calls (``functions``: :class:`REPLFunctions`).

    Args:
        question: the task, in natural language.
        variables: the REPL variables the model is told about, by name (bound into
            ``executor.namespace``).
        services: what the run shares with its children and candidates
            (:class:`~rlm_kernel.engine.services.RunServices`): settings, the clients
            (called through ``root_client``/``sub_client``), ledger, budget guard,
            recorder, observer, replay record.
        executor: where the model's code runs.
        depth: 0 for a top-level run, n for an ``rlm_query`` child n levels down.
        child_runner: what ``rlm_query`` calls: ``callable(prompt, context) -> str |
            None`` (None beyond the host's depth limit).
        task: the task's terms (:class:`~rlm_kernel.engine.session.task.TaskSpec`): the
            answer's type, the earlier tasks of the conversation, the user's tools,
            which variables are protected; None: none of them.
    """

    def __init__(self, question: str, variables: dict[str, Any], services: RunServices, *,
                 executor: Executor, depth: int,
                 child_runner: Callable[[str, Any], str | None] | None,
                 task: TaskSpec | None = None) -> None:
        self.services = services
        cfg = self.config = services.config
        self.task = task = task or TaskSpec()
        self.start = time.perf_counter()
        # every call goes through the services' wrappers (redaction, record, budget, span)
        root, sub = services.root_client, services.sub_client
        self.question, self.executor, self.root = question, executor, root
        self.ledger, self.guard, self.depth = services.ledger, services.guard, depth
        self.recorder = services.recorder
        self.observer, self.replay = services.observer, services.replay
        self.ns: MutableMapping[str, Any] = executor.namespace
        self.ns.update(variables)
        # the user's tools (in-process: copies, tool_guard), the folder's, the earlier
        # tasks' record
        self.lent = LentTools(task.tools, self.ns,
                              copy=executor.in_process)
        bound = dict(self.lent.bound)
        if task.folder is not None:
            bound.update(task.folder.functions())
        if task.history:
            bound[HISTORY_NAME] = task.history.as_data()
        self.ns.update(bound)
        metas = [describe_variable(n, v, preview_length=cfg.preview_chars)
                 for n, v in variables.items()]
        self.functions = REPLFunctions(sub, self.guard, self.ns, depth=depth,
                                   max_concurrency=cfg.max_concurrency,
                                   child_runner=child_runner,
                                   client_kwargs={"temperature": cfg.temperature,
                                                  "max_tokens": cfg.max_sub_tokens,
                                                  "cache": cfg.cache is not None,
                                                  "router": cfg.router},
                                   data_name="context" if "context" in variables
                                   else next(iter(variables), "context"),
                                   compose=services.compose)
        self.functions.notify = self.notify
        self.reserved = self.functions.functions()
        protected = task.protected
        self.inputs = {n: v for n, v in variables.items()
                       if protected is None or n in protected} if cfg.protect_inputs else {}
        self.inputs.update(bound)
        # the user's inputs, for the answer's source: the variables given (but those an
        # earlier task's code left, unless named as protected) and the user's tools
        working = task.history.working_names(variables) if task.history else set()
        self.user_inputs = {n for n in variables
                            if n not in working or (protected is not None and n in protected)}
        self.user_inputs.update(task.tools)
        self.no_data = not variables and not task.tools and task.folder is None
        self.result = RLMResult(question=question, variables=metas, depth=depth,
                                model=root.model,
                                sub_model=sub.model)
        self.first = task_message(
            question, metas, cfg.max_iterations, variables,
            earlier=task.history.prompt_section(code=cfg.history_code) if task.history
            else None,
            tools=[describe_tool(n, f) for n, f in task.tools.items()],
            folder=task.folder.prompt_section() if task.folder is not None else None,
            answer_type=task.output_type.prompt_line() if task.output_type else None,
            no_data=self.no_data)
        self.prompt_chars = _prompt_chars(cfg, root)
        self.policy = PolicyRegistry.get_termination(cfg.termination,
                                                     config=_policy_config(cfg))
        self.turns: list[dict[str, str]] = []  # the conversation after the task message
        self.seen_code: dict[str, int] = {}  # code -> first step that ran it
        self.repetitions = RepetitionDetector(cfg.repeat_limit) \
            if cfg.repeat_limit else None  # this run's steps only: copying is not looping
        self.warned: Repetition | None = None  # the repetition the model was told of
        self.repeated: Repetition | None = None  # this step's first repetition
        self.asked_again: Repetition | None = None  # this step's reply, sampled again
        self.resample = False  # the next reply is sampled at resample_temperature
        self.live_output: list[str] = []  # the running step's output as shown live
        self.stuck: Repetition | None = None  # a repetition after the model was told
        self.pending: StepOutcome | None = None  # a FINAL awaiting its check step
        self.failures = 0  # steps in a row that failed or ran no code
        self.first_step = 1  # > 1 when continuing a run
        self.forced_reply: str | None = None  # the next step's reply given, not asked for
        self.executor_error: Exception | None = None  # the error of the REPL that ended it
        self.ns.update(self.reserved)
        self.start_ids = variable_ids(executor)  # what the steps found
        if task.output_type is not None:
            self.result.answer_type = task.output_type.name
        if task.history:
            self.result.conversation = task.history.to_list()
        self.notify(RunStarted(question=question, variables=metas,
                               max_iterations=cfg.max_iterations, model=self.result.model,
                               inputs=sorted(self.user_inputs), no_data=self.no_data))

    # -- the run ------------------------------------------------------------------------
    def execute(self, continuation: Continuation | None = None) -> RLMResult:
        """Run to the end inside an ``invoke_agent`` span; never raises for errors of
        the model, its code or the budget: they end the run with a ``stopped_by``
        reason.  An error of the executor itself (:data:`EXECUTOR_ERRORS`: its worker
        died and could not be started again ...) ends the run with ``stopped_by``
        ``"error"`` and the failed step kept, in the loop or in the clean-up after it
        (:func:`end_by_executor_error`).  An error of the engine itself is logged (this
        module's logger) with its traceback, which ``RLMResult.traceback`` keeps too.
        The result is redacted (:meth:`RLMResult.redact`) before the observer and the
        caller see it.

        Args:
            continuation: go on from one of an earlier run's steps (its earlier steps
                are taken as they were, not run again).
        """
        result = self.result
        # the executor's waits on its worker end with the time budget (clean-up too)
        with run_deadline(self.executor, self.guard.seconds_left()), \
                tracing.run_span(self.question, result.model, self.depth) as span:
            if continuation is not None:
                self.forced_reply = self._seed(continuation)
                self.first_step = continuation.from_step
            try:
                self._loop()
            except BudgetExceeded as exc:
                result.stopped_by, result.error = "budget", self.guard.exceeded or str(exc)
            except KeyboardInterrupt:
                result.stopped_by, result.error = "interrupt", "interrupted by the user"
            except LLMError as exc:
                result.stopped_by, result.error = "error", str(exc)
            except EXECUTOR_ERRORS as exc:  # the REPL itself failed: the run ends, kept
                self.executor_error = exc
                end_by_executor_error(result, exc)
            except Exception as exc:  # noqa: BLE001 - a bug must not lose the trajectory
                log.exception("internal error in the RLM loop (step %d)", len(result.history))
                result.stopped_by = "error"
                result.error = f"internal error: {type(exc).__name__}: {exc}"
                result.traceback = "".join(traceback.format_exception(exc))
            finally:
                self._clean_up()
                result.calls = list(self.ledger.calls)
                result.exchanges = list(self.recorder.exchanges)
                result.root_prompts = list(self.recorder.root_prompts)
                result.seconds = time.perf_counter() - self.start
                if result.answer is None:
                    result.answer_source = None
                result.redact()  # what leaves the engine holds no secret (engine.result)
                self.notify(RunFinished(result=result, answer_source=result.answer_source,
                                        votes=result.votes))
            if span is not None:
                span.set_attributes({**tracing.usage_attributes(result),
                                     "rlm.stopped_by": result.stopped_by,
                                     "rlm.steps": result.steps})
        return result

    def _clean_up(self) -> None:
        """After the run: the user's tools back under their names
        (:meth:`_restore_names`) and the variables the steps made listed
        (``new_variables``).  Skipped once the REPL failed with a ``WorkerError`` (its
        worker is gone: its names cannot be read); an executor error here ends the run
        (:func:`end_by_executor_error` ``after_run``), never escapes."""
        if isinstance(self.executor_error, WorkerError):
            return
        try:
            self._restore_names(None)
            self.result.new_variables = self._new_variables()
        except EXECUTOR_ERRORS as exc:
            self.executor_error = exc
            end_by_executor_error(self.result, exc, after_run=True)

    def _loop(self) -> None:
        """Steps until the policy accepts an answer, too many steps fail in a row, or
        ``max_iterations`` is reached (then one last "answer now" call)."""
        for step in range(self.first_step, self.config.max_iterations + 1):
            if self._judge(step, self._step(step)):
                return
        if self.pending is not None:  # the check step did not answer: keep the first answer
            self._accept(self.pending)
            return
        self.result.stopped_by = "max_iterations"
        self._answer_now()

    # -- one step -----------------------------------------------------------------------
    def _step(self, step: int) -> StepOutcome:
        """One step: ask the root model, run its code, restore reserved names, record
        the step.

        Raises:
            BudgetExceeded: the budget ran out before or during the step.
            WorkerError, OSError: the executor failed (the step is kept, with what it
                printed and the failure: :meth:`_keep_failed_step`).
        """
        reply = self._ask(step)
        with tracing.step_span(step, self.depth):
            outcome = self._run_code(reply, step)
        log.debug("step %d (depth %d): %d characters of code, success %s, final %s", step,
                  self.depth, len(outcome.code), outcome.success, outcome.final)
        try:
            self._restore_names(outcome, step)
        except EXECUTOR_ERRORS as exc:
            self._keep_failed_step(outcome, step, exc)
            raise
        self._check_repetition(step, outcome)
        self._record(step, outcome)
        if self.guard.exceeded or self.guard.overspent():
            raise BudgetExceeded(self.guard.exceeded)
        return outcome

    def _ask(self, step: int) -> str:
        """The root model's reply for ``step`` (a continued run's edited step is given,
        not asked for).  At temperature 0 a small model that repeats itself once usually
        loops until the step limit, so after a repetition the reply is sampled at
        ``resample_temperature``; and the run's first reply whose code repeats an
        earlier step's (:meth:`_repeats`) is not run: the model is shown the
        repetition (:func:`~rlm_kernel.engine.prompts.repetition_message`) and
        sampled again at that temperature."""
        cfg = self.config
        self.guard.check()
        if self.depth == 0:
            self.recorder.step = step
        self.notify(ModelCall(step=step))
        if self.forced_reply is not None:
            reply, self.forced_reply = self.forced_reply, None
            return reply
        messages = build_messages(self.first, self.turns, cfg.history_window,
                                  self.prompt_chars)
        differently: dict[str, Any] = {"temperature": cfg.resample_temperature} \
            if cfg.resample_temperature else {}
        sampling = differently if self.resample else {}
        self.resample = False
        reply = reply_text(self.root, messages, role="root", stop=cfg.stop_sequences(),
                           **sampling)
        rep = self._repeats(reply) if self.warned is None else None
        if rep is not None:  # shown to the model and sampled again, before it runs
            self.warned = self.asked_again = rep
            kept = split_reply(reply, cfg.cut_after_first_block)[2]
            messages += [{"role": "assistant", "content": kept},
                         {"role": "user", "content": repetition_message(rep)}]
            try:
                reply = reply_text(self.root, messages, role="root",
                                   stop=cfg.stop_sequences(), **differently)
            except BudgetExceeded:  # no budget for a second sample: run the first
                pass
        return reply

    def _repeats(self, reply: str) -> Repetition | None:
        """The repetition ``reply``'s code would make if it ran (the same normalised
        code as an earlier step's of this run), or None; never for a check
        step, which may repeat its FINAL."""
        if self.repetitions is None or self.pending is not None:
            return None
        _, blocks, _ = split_reply(reply, self.config.cut_after_first_block)
        return self.repetitions.repeats_code("\n\n".join(blocks))

    def _check_repetition(self, step: int, outcome: StepOutcome) -> None:
        """Whether ``step`` repeats an earlier step of this run: the same normalised
        code, output or error, or the same code and result but for their numbers,
        ``repeat_limit`` times
        (:class:`~rlm_kernel.engine.repetition.RepetitionDetector`).  The run's first
        repetition is kept for the next message (the model is told,
        :attr:`repeated`) and the next reply is sampled differently; a repetition
        after that makes the run stuck (:attr:`stuck`; :meth:`_judge` stops it).  A
        step with a ``FINAL`` and the check step of a held one are not judged.  Tells
        the observer ``step_notice`` (``reason`` ``"repeated"`` or ``"stuck"``) for
        the step's cell."""
        self.repeated, asked_again, self.asked_again = None, self.asked_again, None
        if self.repetitions is None or outcome.final or self.pending is not None:
            return
        if asked_again is not None:
            self.notify(StepNotice(
                step=step, reason="repeated",
                text=f"The model's first reply to this step repeated "
                     f"{repeated_step(asked_again)}; it was told so and asked again."))
        rep = self.repetitions.observe(step, signature(
            outcome.code, outcome.output, outcome.success, reply=outcome.reply_for_history,
            error=outcome.error_for_model))
        if rep is None:
            return
        if self.warned is None:
            self.warned = self.repeated = rep
            self.resample = True
            self.notify(StepNotice(
                step=step, reason="repeated",
                text=f"This step repeats {repeated_step(rep)}: the model is told so, and its "
                     "next step is sampled differently."))
            return
        self.stuck = rep  # the run's end says that it stopped, and why (_stop_stuck)
        self.notify(StepNotice(step=step, reason="stuck",
                               text=f"This step repeats {repeated_step(rep)} again."))

    def _run_code(self, reply: str, step: int, *, final_only: bool = False) -> StepOutcome:
        """Split ``reply`` into reasoning and code, run the code, and take the step's
        ``FINAL`` (or a FINAL written in prose when the reply has no code).

        Args:
            reply: the model's reply text.
            step: the step's number (from 1).
            final_only: run the code only if it calls FINAL/FINAL_VAR (the last
                "answer now" call).

        Raises:
            WorkerError, OSError: the executor failed while the code ran or its
                ``FINAL`` was read (the step is kept: :meth:`_keep_failed_step`).
        """
        reasoning, blocks, kept = split_reply(reply, self.config.cut_after_first_block)
        outcome = StepOutcome(reply=reply, reply_for_history=kept, reasoning=reasoning)
        if not blocks:
            found, value, outcome.error_for_model = final_from_text(reply, self.ns)
            if found:
                self._set_answer(outcome, value, step)
            return outcome
        code = "\n\n".join(blocks)
        if final_only and not detect_final_in_code(code).detected:
            return outcome
        outcome.code = code
        # a step whose executor records reads but gives no result (interrupted, failed)
        # claims none; an executor that records none is read from its code
        outcome.names_read = frozenset() if hasattr(self.executor, "read_watch") else None
        self.notify(StepStarted(step=step, code=code, reasoning=reasoning,
                                answer_now=final_only))
        try:
            res = self._execute(code, step)
        except KeyboardInterrupt:  # the user's stop: the step is kept, and told finished
            shown = "".join(self.live_output).rstrip("\n")
            outcome.output = f"{shown}\n{STEP_INTERRUPTED}".lstrip("\n")
            outcome.success = False
            self._record(step, outcome)
            raise
        except EXECUTOR_ERRORS as exc:
            self._keep_failed_step(outcome, step, exc, "".join(self.live_output))
            raise
        outcome.output, outcome.success = combined_output(res), res.success
        outcome.seconds, outcome.llm_calls = res.execution_time, res.llm_calls
        outcome.names_read = res.names_read
        try:
            outcome.signals = self._take_signals()
            self._take_answer(outcome, self.functions.take_final(), step)
        except EXECUTOR_ERRORS as exc:
            self._keep_failed_step(outcome, step, exc)
            raise
        return outcome

    def _keep_failed_step(self, outcome: StepOutcome, step: int, exc: BaseException,
                          shown: str | None = None) -> None:
        """Record ``step`` as failed by its executor: its output (``shown``: what it
        printed live; else the outcome's) and the failure's line, so the trajectory
        keeps the step that broke the REPL."""
        text = (outcome.output if shown is None else shown).rstrip("\n")
        outcome.output = f"{text}\n{executor_failure(exc)}".lstrip("\n")
        outcome.success = False
        self._record(step, outcome)

    def _execute(self, code: str, step: int) -> REPLResult:
        """Run a step's code under its time limit (``step_timeout``, cut to the seconds
        left of ``max_seconds``: the time budget holds inside a step, and the next
        model call ends the run), streaming ``step_output`` events; the result's
        ``llm_calls`` are the sub-calls that returned while it ran."""
        self.live_output = live = []  # what the step showed: kept if the user stops it

        def on_output(stream: str, text: str) -> None:
            live.append(text)
            self.notify(StepOutput(step=step, stream=stream, text=text))

        self.functions.take_final()  # a FINAL left over from outside this step does not count
        self.functions.step_calls = calls = []  # this step's llm_query records
        timeout, left = self.config.step_timeout, self.guard.seconds_left()
        if left is not None:
            timeout = max(left, MIN_SECONDS) if timeout is None else \
                max(min(timeout, left), MIN_SECONDS)
        watching = hasattr(self.executor, "read_watch")  # executed reads recorded
        previous = getattr(self.executor, "read_watch", None)
        if watching:
            self.executor.read_watch = self.checks.read_watch  # type: ignore[attr-defined]
        try:
            res = self.executor.execute(code, timeout=timeout, on_output=on_output)
        finally:
            if watching:  # a child run's step inside its parent's
                self.executor.read_watch = previous  # type: ignore[attr-defined]
        res.llm_calls = list(calls)
        return res

    def _take_signals(self) -> dict[str, float]:
        """Remove the :data:`~rlm_kernel.engine.step.SIGNAL_NAMES` variables from the
        namespace; their numbers by key (exact ``int``/``float`` only: a subclass's
        ``__float__`` would be model code running on the host)."""
        signals: dict[str, float] = {}
        for name, key in SIGNAL_NAMES.items():
            value = self.ns.pop(name, None)
            if type(value) in (int, float):
                signals[key] = float(value)
        return signals

    # -- the step's FINAL (the rules: engine.answer.checks) ------------------------------
    @cached_property
    def checks(self) -> FinalChecks:
        """The host's checks of this run's ``FINAL`` values
        (:class:`~rlm_kernel.engine.answer.checks.FinalChecks`), built at first use."""
        return FinalChecks(
            self.question, self.config,
            answer_type=self.task.output_type, top_level=self.depth == 0, namespace=self.ns,
            inputs=self.inputs, user_inputs=self.user_inputs, data_name=self.functions.data_name,
            folder=self.task.folder.functions() if self.task.folder is not None else (),
            redact=self.functions.redact)

    def _take_answer(self, outcome: StepOutcome, record: dict[str, Any] | None,
                     step: int) -> None:
        """Turn the step's recorded ``FINAL``/``FINAL_VAR`` (if any) into ``outcome``'s
        answer (:meth:`FinalChecks.take`: a ``FINAL_VAR`` of a missing name fails the
        step and tells the model; a value of the wrong type is refused, :meth:`_notice`)."""
        if (notice := self.checks.take(outcome, record)) is not None:
            self._notice(outcome, step, notice, "answer_type")

    def _set_answer(self, outcome: StepOutcome, value: Any, step: int) -> None:
        """Make ``value`` (a ``FINAL`` written in prose) ``outcome``'s answer, after the
        host's checks (:meth:`FinalChecks.accept`); a refused one is noted in the
        step's output and cell (:meth:`_notice`)."""
        if (notice := self.checks.accept(outcome, value)) is not None:
            self._notice(outcome, step, notice, "answer_type")

    def _notice(self, outcome: StepOutcome, step: int, text: str, reason: str) -> None:
        """A note of the host's about ``step`` (an input put back, an answer refused):
        appended to the step's output, which the model reads, and told to the
        observer (``step_notice``) for the step's cell."""
        outcome.output = "\n".join([outcome.output.rstrip(), text]).lstrip()
        self.notify(StepNotice(step=step, text=text, reason=reason))

    def _restore_names(self, outcome: StepOutcome | None, step: int = 0) -> None:
        """Undo rebinding or deletion of reserved names, protected input variables and
        the user's tools, and changes made in place to those tools and the globals
        they read (:class:`~rlm_kernel.engine.session.user_tools.LentTools`), and say so in the
        step's output and cell (:meth:`_notice`; ``outcome`` None: after the run, when
        the user's own tool objects go back under their names)."""
        ns, reserved = self.ns, self.reserved
        broken = [n for n in RESERVED_NAMES if ns.get(n) is not reserved[n]]
        for name in broken:
            ns[name] = reserved[name]
        changed = [n for n, v in self.inputs.items() if ns.get(n, _MISSING) is not v]
        for name in changed:
            ns[name] = self.inputs[name]
        tampered = self.lent.restore()
        if outcome is None:  # the run is over: the user's own tools back under their names
            for name, tool in self.lent.originals.items():
                if self.lent.bound[name] is not tool and ns.get(name) is self.lent.bound[name]:
                    ns[name] = tool
            return
        if (note := restored_note(broken, changed, tampered)) is not None:
            self._notice(outcome, step, note, "restored")

    def _new_variables(self) -> list[REPLVariable]:
        """Metadata of the data variables the run's steps created or rebound (the
        conversation's working state; :mod:`~rlm_kernel.engine.session.conversation`)."""
        before, cfg = self.start_ids, self.config
        if isinstance(self.executor, SupportsDescribe):  # made where the values live
            now = self.executor.variable_ids()
            return [v for v in self.executor.describe_variables(
                        skip=(*RESERVED_NAMES, *SESSION_NAMES),
                        preview_length=cfg.preview_chars)
                    if (v.name not in now or before.get(v.name) != now[v.name])
                    and v.name not in self.inputs]
        return [describe_variable(n, v, preview_length=cfg.preview_chars)
                for n, v in user_variables(self.ns).items()
                if before.get(n) != id(v) and n not in self.inputs]

    def _record(self, step: int, outcome: StepOutcome) -> None:
        """Append the step to the trajectory (with the sub-calls made while its code
        ran), note a replay's first divergence, tell the observer ``step_finished``
        (``diverged``: this step's output differs from the record)."""
        result = self.result
        result.history = result.history.append(
            reasoning=outcome.reasoning, code=outcome.code, output=outcome.output,
            execution_time=outcome.seconds, llm_calls=outcome.llm_calls,
            names_read=outcome.names_read)
        diverged = (self.replay is not None and self.depth == 0
                    and self.replay.diverges(len(result.history) - 1, outcome.output))
        if diverged and result.diverged_at is None:
            result.diverged_at = step
        exchanges = [e for e in self.recorder.exchanges if e["step"] == step] \
            if self.depth == 0 else []
        self.notify(StepFinished(step=step, outcome=outcome, diverged=diverged,
                                 exchanges=exchanges))

    # -- judging a step -----------------------------------------------------------------
    def _judge(self, step: int, outcome: StepOutcome) -> bool:
        """Ask the termination policy whether to stop; then end the run (True), hold
        the step's ``FINAL`` for one look back (:meth:`_look_back`), or add the next
        user message.  True also when ``max_consecutive_errors`` steps in a row failed
        or ran no code.

        The answer is the step's ``FINAL`` (the host's record, or the text fallback of
        a reply without code), never text the step's code printed.  A policy that
        stops a step without one (a reward threshold, a confidence) ends the run with
        its own answer text, which it made from the model's words
        (:meth:`_action_result`), or no answer when that is empty; a stop on a
        ``FINAL(`` written in the model's prose is no stop
        (:func:`~rlm_kernel.engine.step.writes_final`): that FINAL was judged already."""
        cfg = self.config
        action = self._action_result(outcome, step)
        done, policy_answer = self.policy.should_terminate(
            action, self._policy_context(step, outcome))
        if done and not outcome.final and writes_final(action.output):
            done = False  # a FINAL in prose that the text fallback did not take
        check = self._look_back(step, outcome) if done and outcome.final else None
        if done and check is None:
            if outcome.final:
                self._accept(outcome)
            else:  # a policy that stops without FINAL (a reward threshold): its text
                answer = self.functions.redact(policy_answer) \
                    if isinstance(policy_answer, str) and policy_answer.strip() else None
                self.result.answer = self.result.answer_value = answer
                self.result.stopped_by = "final"
                self.result.answer_source = self._source(from_text=True)
            return True
        if check is not None:  # the FINAL is held; the next step answers the check
            self.pending, text = outcome, check
        else:
            text = self._next_message(outcome.code, outcome.output, outcome.success, step,
                                      repetition=self.repeated if self.stuck is None
                                      else None,
                                      error=outcome.error_for_model)
        self._add_turns(outcome.reply_for_history, text, outcome.code, step)
        if self.stuck is not None:  # it repeated itself again after being told
            self._stop_stuck(step)
            return True
        self.failures = 0 if outcome.success and outcome.code else self.failures + 1
        if cfg.max_consecutive_errors and self.failures >= cfg.max_consecutive_errors:
            self.result.stopped_by = "error"
            self.result.error = f"{self.failures} steps in a row failed or ran no code"
            return True
        return False

    def _look_back(self, step: int, outcome: StepOutcome) -> str | None:
        """The message that holds ``step``'s ``FINAL`` for one more step, or None to
        accept it.  At most one look back per run, never after the last step:

        - ``ground_answer`` (top-level runs): a value typed into ``FINAL`` that no
          output and no variable holds (:func:`~rlm_kernel.engine.answer.grounding.finding`)
          sends the model back to find it with code;
        - else ``verify_answer``: the model checks the answer against the question.

        Tells the observer ``answer_check`` (``reason`` ``"grounding"`` or ``"verify"``).
        The rules: :meth:`FinalChecks.look_back`.
        """
        held = self.checks.look_back(step, outcome, self.result.history) \
            if self.pending is None else None
        if held is None:
            return None
        self.notify(AnswerCheck(step=step, answer=outcome.answer, reason=held.reason,
                                finding=held.finding))
        return held.message

    def _accept(self, outcome: StepOutcome) -> None:
        """End the run with ``outcome``'s FINAL as the answer, and say how it was
        reached (:meth:`_source`; a FINAL written in prose is taken from text)."""
        self.result.answer, self.result.answer_value = outcome.answer, outcome.answer_value
        self.result.stopped_by = "final"
        self.result.answer_source = self._source(outcome, from_text=not outcome.code)

    def _source(self, outcome: StepOutcome | None = None, *, forced: bool = False,
                from_text: bool = False) -> str:
        """How the answer is reached (:func:`~rlm_kernel.engine.answer.sources.answer_source`):
        whether the trajectory's code read one of the user's inputs, and whether the
        grounding check finds ``outcome``'s FINAL value (None: no FINAL to check);
        :meth:`FinalChecks.source`."""
        return self.checks.source(self.result.history, outcome, forced=forced,
                                  from_text=from_text)

    def _next_message(self, code: str, output: str, success: bool, step: int,
                      repetition: Repetition | None = None, error: str | None = None) -> str:
        """The user message after ``step``: its output and the next step's line."""
        cfg, asked = self.config, self.task.output_type
        question = question_with_type(self.question, asked.name if asked else None)
        return next_message(code, output, success, step + 1, cfg.max_iterations,
                            limit=cfg.max_output_chars, repetition=repetition,
                            error=error, question=question if cfg.restate_question else None)

    def _add_turns(self, reply: str, message: str, code: str, step: int) -> None:
        """The conversation after ``step``: the model's reply (as kept), our message."""
        self.turns.append({"role": "assistant", "content": reply})
        self.turns.append({"role": "user", "content": message})
        if code:
            self.seen_code.setdefault(code, step)

    def _action_result(self, outcome: StepOutcome, step: int) -> ActionResult:
        """The :class:`ActionResult` a termination policy sees for one step.

        ``action_type`` is ``"final"`` (output = the answer's text) when the step called
        ``FINAL``/``FINAL_VAR`` (or, without code, wrote one the text fallback took),
        else ``"code"`` with output = the model's own words of the step: its reply
        outside the code blocks (:func:`~rlm_kernel.engine.step.model_words`).  Never
        the step's output: what executed code prints is data (a document may hold
        ``FINAL(result)``), and a pattern found there must neither end the run nor
        become its answer.  ``error`` is the message the model is shown about a failed
        ``FINAL``, if any.
        ``metadata``: ``step`` (from 1), ``seconds`` (execution time), ``sub_calls``
        (number of ``llm_query`` calls while the code ran), ``output_chars`` (length of
        the whole output), ``success``, and ``confidence`` / ``last_reward`` (floats)
        when the step's code reported them.
        """
        metadata: dict[str, Any] = {"step": step, "seconds": outcome.seconds,
                                    "sub_calls": len(outcome.llm_calls),
                                    "output_chars": len(outcome.output),
                                    "success": outcome.success, **outcome.signals}
        if outcome.final:
            return ActionResult(action_type="final", success=True,
                                output=outcome.answer or "", metadata=metadata)
        return ActionResult(action_type="code", success=outcome.success,
                            output=model_words(outcome.reply_for_history),
                            error=outcome.error_for_model, metadata=metadata)

    def _policy_context(self, step: int, outcome: StepOutcome) -> PolicyContext:
        """The :class:`PolicyContext` a termination policy sees after ``step``.

        ``history``: the run's :class:`~rlm_kernel.repl_types.REPLEntry` list so far
        (this step last); ``variables``: the REPL namespace; ``metrics``: ``steps``,
        ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd`` (the
        ledger's totals so far, child runs included), ``seconds`` (since the run
        started), ``last_success`` (this step's), and ``last_reward`` / ``confidence``
        when this step's code reported them (absent otherwise).
        """
        metrics: dict[str, Any] = {**self.ledger.totals(), "steps": len(self.result.history),
                                   "seconds": time.perf_counter() - self.start,
                                   "last_success": outcome.success, **outcome.signals}
        return PolicyContext(task=self.question, step=step,
                             max_steps=self.config.max_iterations, variables=self.ns,
                             history=list(self.result.history.entries), metrics=metrics)

    # -- the end ------------------------------------------------------------------------
    def _stop_stuck(self, step: int) -> None:
        """End a run that repeated a step after being told of a repetition:
        ``stopped_by`` ``"stuck"``, ``error`` says which step it repeated, and one
        "answer now" call (:func:`~rlm_kernel.engine.prompts.stuck_message`) gives the
        best answer so far, marked ``answer_source`` ``"forced"`` (or ``no_input`` /
        ``ungrounded`` when those apply: :mod:`~rlm_kernel.engine.answer.sources`); the
        trajectory is kept."""
        rep, result = self.stuck, self.result
        assert rep is not None
        result.stopped_by = "stuck"
        result.error = (f"step {step} repeats {repeated_step(rep)} after the model was told of "
                        "a repetition")
        self._answer_now(step + 1, stuck_message(rep))  # answer_source: forced at least

    def _answer_now(self, step: int | None = None, message: str | None = None) -> None:
        """After ``max_iterations`` steps (or, with ``step`` and ``message``, when the
        run is stuck): one last call asking for ``FINAL`` now; its
        code runs only if it calls ``FINAL``/``FINAL_VAR``.  A reply without one leaves
        the run without an answer (``answer`` None, ``stopped_by`` ``max_iterations``):
        its prose is a thought, not an answer."""
        cfg, result = self.config, self.result
        last = cfg.max_iterations + 1 if step is None else step
        self.guard.check()
        if self.depth == 0:
            self.recorder.step = last
        messages = build_messages(self.first, self.turns, cfg.history_window,
                                  self.prompt_chars)
        messages.append({"role": "user",
                         "content": message or answer_now_message(cfg.max_iterations)})
        reply = reply_text(self.root, messages, role="final", stop=cfg.stop_sequences())
        outcome = self._run_code(reply, last, final_only=True)
        if outcome.code:  # the FINAL call ran: it is part of the trajectory
            self._record(last, outcome)
        if outcome.final:  # else no answer: a reply that is not a FINAL never becomes one
            result.answer, result.answer_value = outcome.answer, outcome.answer_value
            result.answer_source = self._source(outcome, forced=True)
        elif outcome.error_for_model and self.task.output_type is not None:
            result.error = outcome.error_for_model  # the last FINAL was of the wrong type

    # -- continuing an earlier run --------------------------------------------------------
    def _seed(self, cont: Continuation) -> str | None:
        """Take the steps before ``cont.from_step`` as they were: trajectory entries,
        conversation turns and the code already seen.  Returns the reply to use for
        step ``from_step`` instead of asking the model (None: ask the model)."""
        entries = list(cont.previous.history)
        for step, entry in enumerate(entries[: cont.from_step - 1], start=1):
            self.result.history = self.result.history.append(
                reasoning=entry.reasoning, code=entry.code, output=entry.output,
                execution_time=entry.execution_time, llm_calls=entry.llm_calls,
                names_read=entry.names_read)
            reply = recorded_reply(cont.previous, step, entry.reasoning, entry.code)
            if self.repetitions is not None:  # the steps taken count as seen
                self.repetitions.observe(step, signature(
                    entry.code, entry.output, TRACEBACK_LINE not in entry.output,
                    reply=reply))
            kept = split_reply(reply, self.config.cut_after_first_block)[2]
            self._add_turns(kept, self._next_message(entry.code, entry.output,
                                                     TRACEBACK_LINE not in entry.output, step),
                            entry.code, step)
        return cont.first_reply()

    # -- events -------------------------------------------------------------------------
    def notify(self, event: Event) -> None:
        """Tell the observer ``event`` with the run's ``depth``, ``elapsed`` (seconds)
        and, but for the frequent :class:`~rlm_kernel.engine.events.StepOutput`, the
        ledger's ``totals`` filled in (:mod:`~rlm_kernel.engine.events`)."""
        if self.observer is None:
            return
        totals = None if isinstance(event, StepOutput) else usage_totals(self.ledger)
        emit(self.observer, replace(event, depth=self.depth, totals=totals,
                                    elapsed=time.perf_counter() - self.start))


def _prompt_chars(cfg: RLMConfig, root: LanguageModel) -> int | None:
    """Characters of prompt that fit the root model's context window, if known:
    3 characters a token (code and output tokenise densely), room left for the reply."""
    window = cfg.context_window or root.context_window
    if not window:
        return None
    reply = cfg.max_step_tokens or 1024
    return max(2000, (window - reply - 128) * 3)


def _policy_config(cfg: RLMConfig) -> dict[str, Any] | None:
    """The policy's config.  ``final_pattern`` defaults to case-sensitive matching
    here: printed data such as ``def final(f):`` must not end a run."""
    if not cfg.termination_config and cfg.termination == "final_pattern":
        return {"case_sensitive": True}
    return cfg.termination_config
