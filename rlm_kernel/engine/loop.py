"""The RLM loop: prompt, model reply, code, execution, history, termination.

Imports nothing from Jupyter.  The loop runs over an :class:`Executor` (plain
``exec`` here, the kernel's shell in the kernel) and a :class:`LanguageModel`
(litellm).  Shape after DSPy's ``predict/rlm.py`` and the RLM paper's
reference loop: one root-model call per step, at most ``max_iterations``
steps, then one last "answer now" call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from ..executors import Executor, PlainExecutor
from ..models import LanguageModel, LLMError, UsageLedger, make_client
from ..policies import ActionResult, PolicyContext, PolicyRegistry, TerminationPolicy
from ..repl_types import REPLHistory, REPLVariable
from .budget import Budget, BudgetExceeded, BudgetGuard, GuardedClient
from .config import RLMConfig
from .events import Event, Observer, emit
from .prompts import (
    answer_now_message,
    build_messages,
    check_answer_message,
    next_message,
    task_message,
)
from .result import RLMResult
from .step import StepOutcome, run_reply, split_reply
from .tools import RESERVED_NAMES, RunTools

__all__ = ["RLM"]

_MISSING = object()


def _before_traceback(output: str) -> str:
    """``output`` up to the line that starts a Python or IPython traceback."""
    at = output.find("Traceback (most recent call last)")
    return output if at < 0 else output[: output.rfind("\n", 0, at) + 1]


def _reply_text(client: LanguageModel, messages: list[dict[str, str]], **kwargs: Any) -> str:
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


@dataclass
class _Run:
    """The state of one run (or child run) while it goes: what ``RLM._run``'s steps share."""

    question: str
    executor: Executor
    root: LanguageModel
    ledger: UsageLedger
    guard: BudgetGuard
    depth: int
    ns: MutableMapping[str, Any]
    tools: RunTools
    inputs: dict[str, Any]  # protected input variables (empty when not protected)
    reserved: dict[str, Any]  # the reserved names and the run's functions for them
    result: RLMResult
    first: str  # the task message
    prompt_chars: int | None
    policy: TerminationPolicy
    observer: Observer | None
    start: float  # time.perf_counter() when the run started
    turns: list[dict[str, str]] = field(default_factory=list)  # the conversation after `first`
    seen_code: dict[str, int] = field(default_factory=dict)  # code -> first step that ran it
    pending: StepOutcome | None = None  # a FINAL awaiting its check step
    failures: int = 0  # steps in a row that failed or ran no code

    def notify(self, kind: str, data: dict[str, Any]) -> None:
        """Tell the observer: ``data`` plus ``depth``, ``elapsed`` (seconds) and, but
        for the frequent ``step_output``, the ledger's ``totals`` (see ``events``)."""
        if self.observer is None:
            return
        base: dict[str, Any] = {"depth": self.depth, "elapsed": time.perf_counter() - self.start}
        if kind != "step_output":  # frequent; totals cost O(calls)
            base["totals"] = self.ledger.totals()
        emit(self.observer, Event(kind, {**base, **data}))


def action_result(outcome: StepOutcome, step: int) -> ActionResult:
    """The :class:`ActionResult` a termination policy sees for one step.

    ``action_type`` is ``"final"`` (output = the answer text) when the step called
    ``FINAL``/``FINAL_VAR``, else ``"code"`` (output = the step's output up to a
    traceback, which echoes the failed line: a ``FINAL`` there is not an answer).
    ``error`` is the message the model is shown about a failed ``FINAL``, if any.
    ``metadata``: ``step`` (from 1), ``seconds`` (execution time), ``sub_calls``
    (number of ``llm_query`` calls while the code ran), ``output_chars`` (length of
    the whole output), ``success``, and ``confidence`` / ``last_reward`` (floats)
    when the step's code reported them (:data:`~rlm_kernel.engine.step.SIGNAL_NAMES`).
    """
    metadata: dict[str, Any] = {"step": step, "seconds": outcome.seconds,
                                "sub_calls": len(outcome.llm_calls),
                                "output_chars": len(outcome.output),
                                "success": outcome.success, **outcome.signals}
    if outcome.final:
        return ActionResult(action_type="final", success=True, output=outcome.answer or "",
                            metadata=metadata)
    return ActionResult(action_type="code", success=outcome.success,
                        output=_before_traceback(outcome.output),
                        error=outcome.error_for_model, metadata=metadata)


def policy_context(run: _Run, step: int, outcome: StepOutcome, cfg: RLMConfig) -> PolicyContext:
    """The :class:`PolicyContext` a termination policy sees after ``step``.

    ``history`` is the run's :class:`~rlm_kernel.repl_types.REPLEntry` list so far
    (this step last); ``variables`` the REPL namespace; ``metrics``: ``steps`` (steps
    run), ``llm_calls``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``
    (the ledger's totals so far, child runs included), ``seconds`` (float, since the
    run started), ``last_success`` (bool: this step's), and ``last_reward`` /
    ``confidence`` (floats) when this step's code reported them; absent otherwise,
    so a reward policy sums only reported rewards.
    """
    metrics: dict[str, Any] = {**run.ledger.totals(), "steps": len(run.result.history),
                               "seconds": time.perf_counter() - run.start,
                               "last_success": outcome.success, **outcome.signals}
    return PolicyContext(task=run.question, step=step, max_steps=cfg.max_iterations,
                         variables=run.ns, history=list(run.result.history.entries),
                         metrics=metrics)


class RLM:
    """A Recursive Language Model: a root model working in a persistent REPL.

    Args:
        model: litellm model string of the root model; None (or ``"local"``)
            selects the embedded local model.
        sub_model: model for ``llm_query``; defaults to ``model``.
        config: an :class:`RLMConfig`; keyword arguments override its fields
            (``max_iterations``, ``max_depth``, ``step_timeout`` ...).
        observer: ``callable(Event)`` told about each step as it happens.
        root_client / sub_client: ready :class:`LanguageModel` objects to use
            instead of building litellm clients (scripted models in tests).

    After every step the termination policy (``config.termination``) is asked with
    :func:`action_result` (``metadata``: step, seconds, sub-call count, output length,
    success) and :func:`policy_context` (``history``: the steps so far; ``metrics``:
    steps, calls, tokens, USD, seconds, last success).  Code reports a reward or a
    confidence for its step by binding ``RLM_REWARD`` / ``RLM_CONFIDENCE`` to a number
    (:data:`~rlm_kernel.engine.step.SIGNAL_NAMES`); the host takes them out of the
    namespace after the step into ``metrics["last_reward"]`` and
    ``metrics["confidence"]`` / ``metadata["confidence"]``, for the
    ``reward_threshold`` and ``confidence`` policies.

    Example::

        RLM(model="openai/gpt-4.1-mini").run("Which chapter ...?", context=book)
    """

    def __init__(self, model: str | None = None, sub_model: str | None = None, *,
                 config: RLMConfig | None = None, observer: Observer | None = None,
                 root_client: LanguageModel | None = None,
                 sub_client: LanguageModel | None = None, **overrides: Any) -> None:
        self.config = (config or RLMConfig()).replace(**overrides)
        self.model = model
        self.sub_model = sub_model or model
        self.observer = observer
        self._root_client = root_client
        self._sub_client = sub_client

    # -- public -------------------------------------------------------------------------
    def run(self, question: str, context: Any = None, *, executor: Executor | None = None,
            variables: Mapping[str, Any] | None = None, **more: Any) -> RLMResult:
        """Answer ``question`` by letting the model work on the given variables.

        Args:
            question: the task, in natural language.
            context: the main input (any Python value; a str, a dict of files...),
                bound to ``context`` in the REPL.  Omitted if None.
            executor: where code runs (default: a new :class:`PlainExecutor`);
                an existing namespace keeps its variables.
            variables: further REPL variables the model is told about, by name
                (for names that clash with this method's parameters).
            **more: further REPL variables, as keywords.

        Returns:
            An :class:`RLMResult`; errors end the run with ``stopped_by="error"``
            and a readable ``error`` instead of raising.

        Raises:
            LLMError: before the run, if the model is unknown or a key is missing.
        """
        variables = {**(variables or {}), **more}
        if context is not None:
            variables = {"context": context, **variables}
        root, sub = self._clients()
        root.check()
        if sub is not root:
            sub.check()
        ledger = UsageLedger()
        root.ledger = sub.ledger = ledger
        started = time.monotonic()
        guard = BudgetGuard(self._budget(), ledger, started)
        return self._run(question, variables, executor or PlainExecutor(), root, sub,
                         ledger, guard, depth=0)

    # -- internals ----------------------------------------------------------------------
    def _clients(self) -> tuple[LanguageModel, LanguageModel]:
        cfg = self.config
        root = self._root_client or make_client(self.model, temperature=cfg.temperature,
                                                max_tokens=cfg.max_step_tokens)
        if self._sub_client is not None:
            sub = self._sub_client
        elif self._root_client is None and self.sub_model == self.model:
            sub = root
        else:
            sub = make_client(self.sub_model, temperature=cfg.temperature,
                              max_tokens=cfg.max_sub_tokens)
        self._root_client, self._sub_client = root, sub
        return root, sub

    def _budget(self) -> Budget:
        c = self.config
        return Budget(c.max_llm_calls, c.max_tokens, c.max_cost_usd, c.max_seconds)

    def _run(self, question: str, variables: dict[str, Any], executor: Executor,
             root: LanguageModel, sub: LanguageModel, ledger: UsageLedger,
             guard: BudgetGuard, depth: int) -> RLMResult:
        """One run (or child run at ``depth``) on ready clients; never raises for
        errors of the model, its code or the budget: they end the run with a
        ``stopped_by`` reason (see :meth:`run`)."""
        run = self._start(question, variables, executor, root, sub, ledger, guard, depth)
        try:
            self._loop(run)
        except BudgetExceeded as exc:
            run.result.stopped_by, run.result.error = "budget", guard.exceeded or str(exc)
        except KeyboardInterrupt:
            run.result.stopped_by, run.result.error = "interrupt", "interrupted by the user"
        except LLMError as exc:
            run.result.stopped_by, run.result.error = "error", str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the trajectory
            run.result.stopped_by = "error"
            run.result.error = f"internal error: {type(exc).__name__}: {exc}"
        finally:
            self._restore(run.ns, run.reserved, None, run.inputs)
            run.result.calls = list(ledger.calls)
            run.result.seconds = time.perf_counter() - run.start
            run.notify("run_finished", {"result": run.result})
        return run.result

    def _start(self, question: str, variables: dict[str, Any], executor: Executor,
               root: LanguageModel, sub: LanguageModel, ledger: UsageLedger,
               guard: BudgetGuard, depth: int) -> _Run:
        """Set a run up: clients behind the budget guard, the input variables and
        the run's tools bound in the namespace, the task message, the termination
        policy; tells the observer ``run_started``."""
        cfg = self.config
        start = time.perf_counter()
        if not isinstance(root, GuardedClient):  # every call asks the guard, whoever makes it
            guarded = GuardedClient(root, guard)
            sub = guarded if sub is root else GuardedClient(sub, guard)
            root = guarded
        ns = executor.namespace
        ns.update(variables)
        metas = [REPLVariable.from_value(n, v, preview_length=cfg.preview_chars)
                 for n, v in variables.items()]
        tools = RunTools(sub, guard, ns, depth=depth,
                         max_concurrency=cfg.max_concurrency,
                         child_runner=self._child_runner(root, sub, ledger, guard, depth),
                         client_kwargs={"temperature": cfg.temperature,
                                        "max_tokens": cfg.max_sub_tokens},
                         data_name="context" if "context" in variables
                         else next(iter(variables), "context"))
        run = _Run(question=question, executor=executor, root=root, ledger=ledger,
                   guard=guard, depth=depth, ns=ns, tools=tools,
                   inputs=dict(variables) if cfg.protect_inputs else {},
                   reserved=tools.functions(),
                   result=RLMResult(question=question, variables=metas, depth=depth,
                                    model=getattr(root, "model", ""),
                                    sub_model=getattr(sub, "model", "")),
                   first=task_message(question, metas, cfg.max_iterations, variables),
                   prompt_chars=self._prompt_chars(root),
                   policy=PolicyRegistry.get_termination(cfg.termination,
                                                         config=self._policy_config()),
                   observer=self.observer, start=start)
        ns.update(run.reserved)
        tools.notify = run.notify
        run.notify("run_started", {"question": question, "variables": metas,
                                   "max_iterations": cfg.max_iterations,
                                   "model": run.result.model})
        return run

    def _loop(self, run: _Run) -> None:
        """Steps until the policy accepts an answer, too many steps fail in a row, or
        ``max_iterations`` is reached (then one last "answer now" call)."""
        cfg = self.config
        for step in range(1, cfg.max_iterations + 1):
            outcome = self._step(run, step)
            if self._after_step(run, step, outcome):
                return
        if run.pending is not None:  # the check step did not answer: keep the first answer
            run.result.answer = run.pending.answer
            run.result.answer_value = run.pending.answer_value
            run.result.stopped_by = "final"
            return
        run.result.stopped_by = "max_iterations"
        self._answer_now(run)

    def _step(self, run: _Run, step: int) -> StepOutcome:
        """One step: ask the root model (resampling a repeated reply once), run its
        code, restore reserved names, append the history entry, tell the observer.

        Raises:
            BudgetExceeded: the budget ran out before or during the step.
        """
        cfg = self.config
        run.guard.check()
        run.notify("model_call", {"step": step})
        messages = build_messages(run.first, run.turns, cfg.history_window, run.prompt_chars)
        reply = _reply_text(run.root, messages, role="root", stop=cfg.stop_sequences())
        if cfg.resample_temperature and run.pending is None and \
                self._repeats(reply, run.seen_code):  # a check step may repeat its FINAL
            try:
                reply = _reply_text(run.root, messages, role="root", stop=cfg.stop_sequences(),
                                    temperature=cfg.resample_temperature)
            except BudgetExceeded:  # no budget for a second sample: run the first
                pass
        outcome = run_reply(reply, run.executor, run.tools, step, cfg, run.notify)
        self._restore(run.ns, run.reserved, outcome, run.inputs)
        self._record(run, step, outcome)
        if run.guard.exceeded or run.guard.overspent():
            raise BudgetExceeded(run.guard.exceeded)
        return outcome

    def _after_step(self, run: _Run, step: int, outcome: StepOutcome) -> bool:
        """Judge a step: end the run with its answer (True), hold its ``FINAL`` for
        the answer check, or add the next user message.  True also when
        ``max_consecutive_errors`` steps in a row failed or ran no code."""
        cfg = self.config
        done, answer = self._check_policy(run, outcome, step)
        check = (done and outcome.final and run.pending is None and cfg.verify_answer
                 and step < cfg.max_iterations)
        if done and not check:
            run.result.answer_value = outcome.answer_value if outcome.final else answer
            run.result.answer, run.result.stopped_by = answer, "final"
            return True
        run.turns.append({"role": "assistant", "content": outcome.reply_for_history})
        if check:  # one look back before the answer is accepted
            run.pending = outcome
            text = self._check_message(run.question, outcome, run.result.history, step)
            run.notify("answer_check", {"step": step, "answer": outcome.answer})
        else:
            text = next_message(outcome.code, outcome.output, outcome.success, step + 1,
                                cfg.max_iterations, limit=cfg.max_output_chars,
                                repeated_from=run.seen_code.get(outcome.code),
                                error=outcome.error_for_model,
                                question=run.question if cfg.restate_question else None)
        run.seen_code.setdefault(outcome.code, step)
        run.turns.append({"role": "user", "content": text})
        run.failures = 0 if outcome.success and outcome.code else run.failures + 1
        if cfg.max_consecutive_errors and run.failures >= cfg.max_consecutive_errors:
            run.result.stopped_by = "error"
            run.result.error = f"{run.failures} steps in a row failed or ran no code"
            return True
        return False

    @staticmethod
    def _record(run: _Run, step: int, outcome: StepOutcome) -> None:
        """Append the step to the run's history (with the sub-calls made while its
        code ran) and tell the observer ``step_finished``."""
        run.result.history = run.result.history.append(
            reasoning=outcome.reasoning, code=outcome.code, output=outcome.output,
            execution_time=outcome.seconds, llm_calls=outcome.llm_calls)
        run.notify("step_finished", {"step": step, "outcome": outcome,
                                     "entry": run.result.history.entries[-1]})

    def _check_message(self, question: str, outcome: StepOutcome, history: REPLHistory,
                       step: int) -> str:
        """The answer check's message: the held FINAL value beside the question and the
        output it came from (this step's, or the previous step's when this one
        printed nothing)."""
        evidence = outcome.output
        if not evidence.strip() and len(history) >= 2:
            evidence = history.entries[-2].output
        return check_answer_message(question, outcome.answer_value, evidence, step + 1,
                                    self.config.max_iterations)

    def _repeats(self, reply: str, seen_code: dict[str, int]) -> bool:
        """True when ``reply``'s code is exactly the code of an earlier step (which
        did not end the run): at temperature 0 a small model that repeats itself
        once usually loops until the step limit."""
        _, blocks, _ = split_reply(reply, self.config.cut_after_first_block)
        code = "\n\n".join(blocks)
        return bool(code) and code in seen_code

    @staticmethod
    def _restore(ns: Any, reserved: dict[str, Any], outcome: StepOutcome | None,
                 inputs: dict[str, Any]) -> None:
        """Undo rebinding or deletion of reserved names and protected input variables,
        and tell the model in the step's output."""
        broken = [n for n in RESERVED_NAMES if ns.get(n) is not reserved[n]]
        for name in broken:
            ns[name] = reserved[name]
        changed = [n for n, v in inputs.items() if ns.get(n, _MISSING) is not v]
        for name in changed:
            ns[name] = inputs[name]
        if outcome is None:
            return
        notes = []
        if broken:
            notes.append(f"Warning: {', '.join(broken)} {'is' if len(broken) == 1 else 'are'} "
                         "reserved; the original was restored.")
        if changed:
            notes.append(f"Warning: {', '.join(changed)} {'is' if len(changed) == 1 else 'are'} "
                         "the task's input and read-only; the original was restored. "
                         "Store results under a new name.")
        if notes:
            outcome.output = "\n".join([outcome.output.rstrip(), *notes]).lstrip()

    def _prompt_chars(self, root: LanguageModel) -> int | None:
        """Characters of prompt that fit the root model's context window, if known.

        Estimated at 3 characters a token (code and output tokenise densely),
        leaving room for the completion.
        """
        window = self.config.context_window or getattr(root, "context_window", None)
        if not window:
            return None
        reply = self.config.max_step_tokens or 1024
        return max(2000, (window - reply - 128) * 3)

    def _policy_config(self) -> dict[str, Any] | None:
        """The policy's config.  ``final_pattern`` defaults to case-sensitive matching
        here: printed data such as ``def final(f):`` must not end a run."""
        cfg = self.config
        if cfg.termination_config is None and cfg.termination == "final_pattern":
            return {"case_sensitive": True}
        return cfg.termination_config

    def _check_policy(self, run: _Run, outcome: StepOutcome,
                      step: int) -> tuple[bool, str | None]:
        """Ask the termination policy about a step, with what the engine knows:
        :func:`action_result` and :func:`policy_context`."""
        return run.policy.should_terminate(action_result(outcome, step),
                                           policy_context(run, step, outcome, self.config))

    def _answer_now(self, run: _Run) -> None:
        """After ``max_iterations`` steps: one last call asking for ``FINAL`` now; its
        code runs only if it calls ``FINAL``/``FINAL_VAR``, else its text is the answer."""
        cfg, result = self.config, run.result
        run.guard.check()
        messages = build_messages(run.first, run.turns, cfg.history_window, run.prompt_chars)
        messages.append({"role": "user", "content": answer_now_message(cfg.max_iterations)})
        reply = _reply_text(run.root, messages, role="final", stop=cfg.stop_sequences())
        outcome = run_reply(reply, run.executor, run.tools, cfg.max_iterations + 1, cfg,
                            run.notify, final_only=True)
        if outcome.code:  # the FINAL call ran: it is part of the trajectory
            self._record(run, cfg.max_iterations + 1, outcome)
        if outcome.final:
            result.answer, result.answer_value = outcome.answer, outcome.answer_value
        else:
            result.answer = outcome.reasoning.strip() or reply.strip() or None
            result.answer_value = result.answer

    def _child_runner(self, root: LanguageModel, sub: LanguageModel, ledger: UsageLedger,
                      guard: BudgetGuard, depth: int) -> Callable[[str, Any], str | None]:
        """``run_child(prompt, context)``: a child run one level below ``depth``, or
        None when that is deeper than the config's ``max_depth``.  The depth comes
        from the host (this closure and the frozen config), never from the caller."""
        max_depth = self.config.max_depth
        depth += 1

        def run_child(prompt: str, context: Any) -> str | None:
            if depth > max_depth:
                return None
            child = RLM(self.model, self.sub_model, config=self.config.replace(
                max_iterations=self.config.child_max_iterations), observer=self.observer,
                root_client=root, sub_client=sub)
            variables = {} if context is None else {"context": context}
            res = child._run(prompt, variables, PlainExecutor(), root, sub, ledger, guard,
                             depth=depth)
            if res.stopped_by == "budget":
                raise BudgetExceeded(res.error or "budget used up")
            if res.answer is None:
                return f"Error: the sub-run ended without an answer ({res.stopped_by}: {res.error})"
            return res.answer

        return run_child
