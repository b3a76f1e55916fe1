"""One run of the RLM loop, top to bottom, in one object.

:class:`Run` owns a run's state (the trajectory, the held answer), its settings, its
services' clients and the replay record it is checked against; what one step hands the
next is a value (:class:`~rlm_kernel.engine.step.LoopState`).  A run reads in order::

    Run(...)                        the namespace set up (engine.session.namespace),
                                    the first prompt (engine.prompts.first_prompt)
    execute()                       the run; errors end it with a stopped_by reason
      _loop(state)                  steps until an answer, a limit or repeated failures
        _step(n, state)             -> (outcome, state)
          _ask(n, state)            messages -> the root model's reply (a reply that
                                    repeats an earlier step's code is shown so and
                                    sampled again, once per run)
          code.run(reply, n)        reasoning and code split; code executed; the
                                    step's FINAL taken from the host's record and
                                    checked (engine.code_runner, engine.answer.checks)
          code.restore_names(...)   reserved names, protected inputs and tools put back
          judge_repetition(...)     the same code, output or error as an earlier step
                                    (engine.judging): the first time, the model is
                                    told and its next step sampled differently; the
                                    next time the run is stuck
          _record(n, outcome)       history entry, replay divergence, step_finished
        _judge(n, outcome, state)   -> (done, state): the termination policy says
                                    whether to stop; a FINAL may be held for one look
                                    back (the grounding check, the answer check); else
                                    the next user message
      _answer_now()                 after max_iterations, or when stuck
                                    (_stop_stuck): one last call for FINAL

The answer has one path: ``FINAL``/``FINAL_VAR`` record it host-side
(:class:`~rlm_kernel.engine.answer.final.FinalRecord`, held by the run's REPL functions:
:mod:`~rlm_kernel.engine.repl_functions`) when called (model code catching the exception
does not lose it); :meth:`CodeRunner.run <rlm_kernel.engine.code_runner.CodeRunner.run>`
takes that record and hands it to the host's checks
(:class:`~rlm_kernel.engine.answer.checks.FinalChecks`: resolved to the value, its type
checked, its text rendered once; later the look back and the answer's source).  The
policy decides *whether* to stop, never what a FINAL's answer is.

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
from typing import Any

from ..executors import Executor, FolderBaseline, WorkerError, run_deadline
from ..models import LanguageModel, LLMError, tracing
from ..policies import PolicyRegistry
from ..redaction import redact_text
from .answer.text import describe_variable
from .budget import BudgetExceeded
from .code_runner import EXECUTOR_ERRORS, CodeRunner, executor_failure
from .config import RLMConfig
from .events import (
    Event,
    ModelCall,
    ModelWriting,
    RunFinished,
    RunStarted,
    StepFinished,
    StepOutput,
    emit,
    usage_totals,
)
from .judging import Judge, policy_context
from .prompts import (
    Transcript,
    answer_now_message,
    first_prompt,
    repeated_step,
    repetition_message,
    step_message,
    stuck_message,
)
from .repetition import Repetition
from .repl_functions import REPLFunctions
from .replay.resume import Continuation, recorded_reply
from .result import RLMResult, conversation
from .services import RunServices
from .session.namespace import set_up_namespace
from .session.task import TaskSpec
from .step import TRACEBACK_LINE, LoopState, StepOutcome, split_reply
from .writing import ReplyStream, cut_note

__all__ = ["EXECUTOR_ERRORS", "Run", "end_by_executor_error", "executor_failure",
           "reply_text"]

log = logging.getLogger(__name__)

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
    """One run (or child run) of the loop: its state, settings and clients; its
    namespace (``space``: :class:`~rlm_kernel.engine.session.namespace.RunNamespace`,
    with the REPL functions its code calls) and the runner of its steps' code
    (``code``: :class:`~rlm_kernel.engine.code_runner.CodeRunner`).

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
        child_runner: what ``rlm_query`` calls: ``callable(prompt, context) ->
            RLMResult | None`` (the child's result; None beyond the host's depth limit).
        task: the task's terms (:class:`~rlm_kernel.engine.session.task.TaskSpec`): the
            answer's type, the earlier tasks of the conversation, the user's tools,
            which variables are protected; None: none of them.
    """

    def __init__(self, question: str, variables: dict[str, Any], services: RunServices, *,
                 executor: Executor, depth: int,
                 child_runner: Callable[[str, Any], RLMResult | None] | None,
                 task: TaskSpec | None = None) -> None:
        self.services, self.question, self.depth = services, question, depth
        # a child's calls go through its parent's clients: each says its run's depth
        self.call_depth: dict[str, int] = {"depth": depth} if depth else {}
        self.last_call: tuple[list[dict[str, str]], str] | None = None  # messages, reply
        self.writing: ReplyStream | None = None  # the root model's reply being written
        self.asked: list[dict[str, str]] | None = None  # the messages it answers
        self.task = task = task or TaskSpec()
        self.start = time.perf_counter()
        self.executor_error: Exception | None = None  # the error of the REPL that ended it
        cfg, root = services.config, services.root_client
        # the folder as the run found it, kept by the host for finish() (top level only)
        self.baseline = FolderBaseline.take(task.folder.root) \
            if task.folder is not None and task.folder.finishes else None
        self.space = space = set_up_namespace(
            executor, variables, task, protect_inputs=cfg.protect_inputs,
            functions=lambda ns: _repl_functions(services, ns, variables, depth,
                                                 child_runner, self.notify, self.baseline))
        metas = [describe_variable(n, v, preview_length=cfg.preview_chars)
                 for n, v in variables.items()]
        self.result = RLMResult(
            question=question, variables=metas, depth=depth, model=root.model,
            sub_model=services.sub_client.model,
            answer_type=task.output_type.name if task.output_type is not None else None,
            conversation=task.history.to_list() if task.history else [])
        self.code = CodeRunner(question, cfg, task, space, services.guard, top_level=depth == 0,
                               notify=self.notify, record=self._record)
        self.judge = Judge(PolicyRegistry.get_termination(cfg.termination,
                                                          config=_policy_config(cfg)),
                           cfg.repeat_limit, self.code.checks, self.result,
                           redact=space.functions.redact, notify=self.notify)
        self.transcript = Transcript(
            first_prompt(question, metas, variables, task, cfg, no_data=space.no_data,
                         mcp_tools=services.tools.describe() if services.tools else []),
            cfg.history_window, _prompt_chars(cfg, root))
        self.notify(RunStarted(question=question, variables=metas,
                               max_iterations=cfg.max_iterations, model=self.result.model,
                               inputs=sorted(space.user_inputs), no_data=space.no_data,
                               mcp_tools=services.tools.describe() if services.tools else [],
                               mcp_problems=services.tools.problems() if services.tools
                               else []))

    # -- the run ------------------------------------------------------------------------
    def execute(self, continuation: Continuation | None = None) -> RLMResult:
        """Run to the end inside an ``invoke_agent`` span; never raises for errors of
        the model, its code or the budget: they end the run with a ``stopped_by``
        reason.  An executor error (:data:`EXECUTOR_ERRORS`) ends it with ``"error"``
        and the failed step kept (:func:`end_by_executor_error`); an engine error is
        logged with its traceback (``RLMResult.traceback`` keeps it too).  The result
        is redacted (:meth:`RLMResult.redact`) before the observer and caller see it.

        Args:
            continuation: go on from one of an earlier run's steps (its earlier steps
                are taken as they were, not run again).
        """
        result, services, state, first_step = self.result, self.services, LoopState(), 1
        # the executor's waits on its worker end with the time budget (clean-up too)
        with run_deadline(self.space.executor, services.guard.seconds_left()), \
                tracing.run_span(self.question, result.model, self.depth) as span:
            if continuation is not None:
                state = LoopState(forced_reply=self._seed(continuation))
                first_step = continuation.from_step
            try:
                self._loop(state, first_step)
            except BudgetExceeded as exc:
                result.stopped_by, result.error = "budget", services.guard.exceeded or str(exc)
                self._keep_cut_reply(result.error)
            except KeyboardInterrupt:
                result.stopped_by, result.error = "interrupt", "interrupted by the user"
                self._keep_cut_reply(result.error)
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
                if self.baseline is not None:
                    self.baseline.close()
                result.messages = conversation(*self.last_call or (None, None))
                result.children = list(self.space.functions.children)
                _finish(result, services, self.start)
                self.notify(RunFinished(result=result, answer_source=result.answer_source,
                                        votes=result.votes))
            if span is not None:
                span.set_attributes({**tracing.usage_attributes(result),
                                     "rlm.stopped_by": result.stopped_by,
                                     "rlm.steps": result.steps})
        return result

    def _clean_up(self) -> None:
        """After the run: the user's tools back under their names, the variables the steps
        made listed (``new_variables``); not once a ``WorkerError`` took the REPL.  An
        executor error here ends the run (:func:`end_by_executor_error`), never escapes."""
        if isinstance(self.executor_error, WorkerError):
            return
        try:
            self.result.new_variables = self.space.end_run(self.services.config.preview_chars)
        except EXECUTOR_ERRORS as exc:
            self.executor_error = exc
            end_by_executor_error(self.result, exc, after_run=True)

    def _loop(self, state: LoopState, first_step: int) -> None:
        """Steps from ``first_step`` until the policy accepts an answer, too many steps
        fail in a row, or ``max_iterations`` is reached (then one last "answer now"
        call); each step takes the state the one before it returned."""
        for step in range(first_step, self.services.config.max_iterations + 1):
            outcome, state = self._step(step, state)
            done, state = self._judge(step, outcome, state)
            if done:
                return
        if state.pending is not None:  # the check step did not answer: keep the first answer
            self.judge.accept(state.pending)
            return
        self.result.stopped_by = "max_iterations"
        self._answer_now()

    # -- one step -----------------------------------------------------------------------
    def _step(self, step: int, state: LoopState) -> tuple[StepOutcome, LoopState]:
        """One step: ask the root model, run its code, restore reserved names, judge
        whether it repeats an earlier step, record it.  Raises ``BudgetExceeded`` (the
        budget ran out) and the executor's errors (the step kept:
        :meth:`CodeRunner.keep_failed`)."""
        reply, state = self._ask(step, state)
        with tracing.step_span(step, self.depth):
            outcome = self.code.run(reply, step)
        log.debug("step %d (depth %d): %d characters of code, success %s, final %s", step,
                  self.depth, len(outcome.code), outcome.success, outcome.final)
        self.code.restore_names(outcome, step)
        state = self.judge.repetition(step, outcome, state)
        self._record(step, outcome)
        guard = self.services.guard
        if guard.exceeded or guard.overspent():
            raise BudgetExceeded(guard.exceeded)
        return outcome, state

    def _ask(self, step: int, state: LoopState) -> tuple[str, LoopState]:
        """The root model's reply for ``step`` (a continued run's edited step is given).
        After a repetition it is sampled at ``resample_temperature``; the run's first
        reply whose code repeats an earlier step's (:meth:`Judge.repeats`) is not run:
        the model is shown so (:func:`~.prompts.repetition_message`) and sampled again."""
        cfg, services = self.services.config, self.services
        services.guard.check()
        if self.depth == 0:
            services.recorder.step = step
        self.notify(ModelCall(step=step))
        if state.forced_reply is not None:
            return state.forced_reply, replace(state, forced_reply=None)
        messages = self.transcript.messages()
        differently: dict[str, Any] = {"temperature": cfg.resample_temperature} \
            if cfg.resample_temperature else {}
        sampling, state = differently if state.resample else {}, replace(state, resample=False)
        reply = self._reply(step, messages, role="root", **sampling)
        rep = self.judge.repeats(reply, state, cut_after_first_block=cfg.cut_after_first_block) \
            if state.warned is None else None
        if rep is not None:  # shown to the model and sampled again, before it runs
            state = replace(state, warned=rep, asked_again=rep)
            kept = split_reply(reply, cfg.cut_after_first_block)[2]
            messages += [{"role": "assistant", "content": kept},
                         {"role": "user", "content": repetition_message(rep)}]
            try:
                reply = self._reply(step, messages, role="root", **differently)
            except BudgetExceeded:  # no budget for a second sample: run the first
                messages, self.writing = messages[:-2], None
        self.last_call = (messages, reply)
        return reply, state

    def _reply(self, step: int, messages: list[dict[str, str]], **options: Any) -> str:
        """The root model's reply to ``messages`` for ``step`` (``options``: the call's
        role and sampling), streamed when ``stream_replies`` is on: each piece goes to
        the observer as ``model_writing`` (:class:`~.writing.ReplyStream`), and the
        reply so far is kept in :attr:`writing` until it is complete, for a stop that
        cuts it (:meth:`_keep_cut_reply`).

        Raises:
            LLMError: the call failed.
            BudgetExceeded: the budget ran out (before the call, or while the model wrote).
            KeyboardInterrupt: the user stopped the run (the request is closed).
        """
        cfg = self.services.config
        if not cfg.stream_replies:
            return reply_text(self.services.root_client, messages,
                              stop=cfg.stop_sequences(), **options, **self.call_depth)
        self.writing = ReplyStream(step, self.notify, self.services.guard)
        self.asked = messages
        reply = reply_text(self.services.root_client, messages, stop=cfg.stop_sequences(),
                           stream=self.writing, **options, **self.call_depth)
        self.writing.close()
        self.writing = None
        return reply

    def _keep_cut_reply(self, reason: str) -> None:
        """A stop (``reason``) came while the root model wrote a reply: that reply, as it
        was when it was cut, becomes the last step of the trajectory, its output saying
        so (:func:`~.writing.cut_note`), and the last assistant message of the run's
        conversation (``RLMResult.messages``); its code is not run."""
        writing, self.writing = self.writing, None
        if writing is None or not writing.text:
            return
        text = writing.text
        self.result.history = self.result.history.append(
            reasoning=text, output=cut_note(len(text), reason))
        if self.asked is not None:  # the run's conversation ends with the reply as cut
            self.last_call = (self.asked, text)
        log.info("step %d: the reply was cut after %d characters (%s)", writing.step,
                 len(text), reason)

    def _record(self, step: int, outcome: StepOutcome) -> None:
        """Append the step to the trajectory (with the sub-calls made while its code
        ran), note a replay's first divergence, tell the observer ``step_finished``
        (``diverged``: this step's output differs from the record)."""
        result, replay = self.result, self.services.replay
        result.history = result.history.append(
            reasoning=outcome.reasoning, code=outcome.code, output=outcome.output,
            execution_time=outcome.seconds, llm_calls=outcome.llm_calls,
            names_read=outcome.names_read)
        diverged = (replay is not None and self.depth == 0
                    and replay.diverges(len(result.history) - 1, outcome.output))
        if diverged and result.diverged_at is None:
            result.diverged_at = step
        exchanges = [e for e in self.services.recorder.exchanges if e["step"] == step] \
            if self.depth == 0 else []
        self.notify(StepFinished(step=step, outcome=outcome, diverged=diverged,
                                 exchanges=exchanges))

    # -- judging a step -----------------------------------------------------------------
    def _judge(self, step: int, outcome: StepOutcome,
               state: LoopState) -> tuple[bool, LoopState]:
        """Whether the run ends after ``step`` (True), and the state the next step takes:
        the judge's policy stops it with an answer (:meth:`Judge.stops`), or holds its
        ``FINAL`` for one look back (``state.pending``; the check's message next), or
        the next user message is added.  True also when the run is stuck (it repeated
        itself after being told: :meth:`_stop_stuck`), or when
        ``max_consecutive_errors`` steps in a row failed or ran no code."""
        cfg, result = self.services.config, self.result
        done, check = self.judge.stops(step, outcome, state, policy_context(
            self.question, step, outcome, max_steps=cfg.max_iterations,
            namespace=self.space.ns, history=result.history,
            totals=self.services.ledger.totals(), seconds=time.perf_counter() - self.start))
        if done:
            return True, state
        if check is not None:  # the FINAL is held; the next step answers the check
            state, text = replace(state, pending=outcome), check
        else:
            text = step_message(self.question, self.task, cfg, outcome.code, outcome.output,
                                outcome.success, step, error=outcome.error_for_model,
                                repetition=state.repeated if state.stuck is None else None)
        self.transcript.add(outcome.reply_for_history, text)
        if state.stuck is not None:  # it repeated itself again after being told
            self._stop_stuck(step, state.stuck)
            return True, state
        state = replace(state, failures=0 if outcome.success and outcome.code
                        else state.failures + 1)
        if cfg.max_consecutive_errors and state.failures >= cfg.max_consecutive_errors:
            result.stopped_by = "error"
            result.error = f"{state.failures} steps in a row failed or ran no code"
            return True, state
        return False, state

    # -- the end ------------------------------------------------------------------------
    def _stop_stuck(self, step: int, rep: Repetition) -> None:
        """End a run that repeated a step (``rep``) after being told of a repetition:
        ``stopped_by`` ``"stuck"``, ``error`` says which step it repeated, and one
        "answer now" call (:func:`~.prompts.stuck_message`) gives the best answer so far
        (``answer_source`` ``"forced"`` at least); the trajectory is kept."""
        self.result.stopped_by = "stuck"
        self.result.error = (f"step {step} repeats {repeated_step(rep)} after the model was "
                             "told of a repetition")
        self._answer_now(step + 1, stuck_message(rep))  # answer_source: forced at least

    def _answer_now(self, step: int | None = None, message: str | None = None) -> None:
        """After ``max_iterations`` steps (or, with ``step`` and ``message``, when the
        run is stuck): one last call asking for ``FINAL`` now; its code runs only if it
        calls ``FINAL``/``FINAL_VAR``.  A reply without one leaves the run without an
        answer (``answer`` None, ``stopped_by`` ``max_iterations``): its prose is a
        thought, not an answer."""
        cfg, result, services = self.services.config, self.result, self.services
        last = cfg.max_iterations + 1 if step is None else step
        services.guard.check()
        if self.depth == 0:
            services.recorder.step = last
        messages = self.transcript.messages()
        messages.append({"role": "user",
                         "content": message or answer_now_message(cfg.max_iterations)})
        reply = self._reply(last, messages, role="final")
        self.last_call = (messages, reply)
        outcome = self.code.run(reply, last, final_only=True)
        if outcome.code:  # the FINAL call ran: it is part of the trajectory
            self._record(last, outcome)
        if outcome.final:  # else no answer: a reply that is not a FINAL never becomes one
            result.answer, result.answer_value = outcome.answer, outcome.answer_value
            result.answer_source = self.judge.source(outcome, forced=True)
        elif outcome.error_for_model and self.task.output_type is not None:
            result.error = outcome.error_for_model  # the last FINAL was of the wrong type

    # -- continuing an earlier run --------------------------------------------------------
    def _seed(self, cont: Continuation) -> str | None:
        """Take the steps before ``cont.from_step`` as they were: trajectory entries,
        conversation turns and the steps seen (:meth:`Judge.seen`).  Returns the reply to use
        for step ``from_step`` instead of asking the model (None: ask the model)."""
        for step, entry in enumerate(list(cont.previous.history)[: cont.from_step - 1],
                                     start=1):
            self.result.history = self.result.history.append(
                reasoning=entry.reasoning, code=entry.code, output=entry.output,
                execution_time=entry.execution_time, llm_calls=entry.llm_calls,
                names_read=entry.names_read)
            reply = recorded_reply(cont.previous, step, entry.reasoning, entry.code)
            success = TRACEBACK_LINE not in entry.output
            self.judge.seen(step, entry.code, entry.output, success, reply)
            kept = split_reply(reply, self.services.config.cut_after_first_block)[2]
            self.transcript.add(kept, step_message(self.question, self.task, self.services.config,
                                                   entry.code, entry.output, success, step))
        return cont.first_reply()

    # -- events -------------------------------------------------------------------------
    def notify(self, event: Event) -> None:
        """Tell the observer ``event`` with the run's ``depth``, ``elapsed`` (seconds)
        and, but for the frequent :class:`~rlm_kernel.engine.events.StepOutput` and
        :class:`~rlm_kernel.engine.events.ModelWriting`, the ledger's ``totals`` filled in (:mod:`~rlm_kernel.engine.events`)."""
        if self.services.observer is None:
            return
        totals = None if isinstance(event, (StepOutput, ModelWriting)) \
            else usage_totals(self.services.ledger)
        emit(self.services.observer, replace(event, depth=self.depth, totals=totals,
                                             elapsed=time.perf_counter() - self.start))


def _repl_functions(services: RunServices, ns: MutableMapping[str, Any],
                    variables: dict[str, Any], depth: int,
                    child_runner: Callable[[str, Any], RLMResult | None] | None,
                    notify: Callable[[Event], None],
                    baseline: FolderBaseline | None = None) -> REPLFunctions:
    """A run's REPL functions (``llm_query``, ``rlm_query``, ``FINAL`` ...) on ``ns``,
    calling the services' sub-model client; their ``sub_call`` events go to ``notify``;
    ``finish`` diffs the folder against ``baseline`` (None: refused)."""
    cfg = services.config
    functions = REPLFunctions(
        services.sub_client, services.guard, ns, depth=depth,
        max_concurrency=cfg.max_concurrency, child_runner=child_runner,
        client_kwargs={"temperature": cfg.temperature, "max_tokens": cfg.max_sub_tokens,
                       "cache": cfg.cache is not None, "router": cfg.router},
        data_name="context" if "context" in variables else next(iter(variables), "context"),
        compose=services.compose, baseline=baseline, tools=services.tools)
    functions.notify = notify
    return functions


def _finish(result: RLMResult, services: RunServices, start: float) -> None:
    """The run's record filled in at its end (calls, exchanges, root prompts, seconds
    since ``start``), an answer's source dropped with no answer, and the result
    redacted: what leaves the engine holds no secret (:meth:`RLMResult.redact`)."""
    result.calls = list(services.ledger.calls)
    result.exchanges = list(services.recorder.exchanges)
    result.root_prompts = list(services.recorder.root_prompts)
    result.seconds = time.perf_counter() - start
    if result.answer is None:
        result.answer_source = None
    result.redact()


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
