"""The RLM loop: prompt, model reply, code, execution, history, termination.

Imports nothing from Jupyter.  The loop runs over an :class:`Executor` (plain
``exec`` here, the kernel's shell in the kernel) and a :class:`LanguageModel`
(litellm).  Shape after DSPy's ``predict/rlm.py`` and the RLM paper's
reference loop: one root-model call per step, at most ``max_iterations``
steps, then one last "answer now" call.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..executors import Executor, PlainExecutor
from ..models import LanguageModel, LLMError, UsageLedger, make_client, tracing
from ..models.cache import configure_cache
from ..policies import PolicyRegistry
from ..repl_types import REPLVariable
from .budget import Budget, BudgetExceeded, BudgetGuard, GuardedClient
from .children import child_runner
from .config import RLMConfig
from .events import Observer
from .judge import after_step, answer_now, record_step
from .prompts import (
    build_messages,
    task_message,
)
from .recording import ReplayModel, load_recording
from .result import RLMResult
from .resume import Continuation, seed_run
from .run_state import (
    RunState,
    policy_config,
    prompt_chars,
    repeats,
    reply_text,
    restore_names,
)
from .step import StepOutcome, run_reply
from .tools import RunTools

__all__ = ["RLM"]

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
        replay: a recorded run to answer from instead of any model (an
            :class:`RLMResult`, its ``to_dict()``, a ``.json`` or ``.ipynb`` path; see
            :mod:`rlm_kernel.engine.recording`); the result's ``diverged_at`` is the
            first step whose output differs from the record's.

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
                 sub_client: LanguageModel | None = None, replay: Any = None,
                 **overrides: Any) -> None:
        self.config = (config or RLMConfig()).replace(**overrides)
        self.replay = None if replay is None else load_recording(replay)
        self.model = model
        self.sub_model = sub_model or model
        self.observer = observer
        self._root_client = root_client
        self._sub_client = sub_client

    # -- public -------------------------------------------------------------------------
    def run(self, question: str, context: Any = None, *, executor: Executor | None = None,
            variables: Mapping[str, Any] | None = None,
            continuation: Continuation | None = None, **more: Any) -> RLMResult:
        """Answer ``question`` by letting the model work on the given variables.

        Args:
            question: the task, in natural language.
            context: the main input (any Python value; a str, a dict of files...),
                bound to ``context`` in the REPL.  Omitted if None.
            executor: where code runs (default: a new :class:`PlainExecutor`);
                an existing namespace keeps its variables.
            variables: further REPL variables the model is told about, by name
                (for names that clash with this method's parameters).
            continuation: continue an earlier run from one of its steps, with that
                step's code edited or not (see :mod:`rlm_kernel.engine.resume`); the
                earlier steps are not run again.
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
        if self.config.callbacks:
            tracing.enable(self.config.callbacks.split(","))
        root, sub = self._clients()
        root.check()
        if sub is not root:
            sub.check()
        ledger = UsageLedger()
        root.ledger = sub.ledger = ledger
        started = time.monotonic()
        guard = BudgetGuard(self._budget(), ledger, started)
        return self._run(question, variables, executor or PlainExecutor(), root, sub,
                         ledger, guard, depth=0, continuation=continuation)

    # -- internals ----------------------------------------------------------------------
    def _clients(self) -> tuple[LanguageModel, LanguageModel]:
        cfg = self.config
        if self.replay is not None and self._root_client is None:
            self._root_client = self._sub_client = ReplayModel(self.replay)
        if self._root_client is None or self._sub_client is None:
            configure_cache(cfg.cache)  # before any client of ours calls litellm
        cache = cfg.cache is not None  # RLMConfig allows "memory", "disk" or None
        root = self._root_client or make_client(self.model, temperature=cfg.temperature,
                                                max_tokens=cfg.max_step_tokens, cache=cache)
        if self._sub_client is not None:
            sub = self._sub_client
        elif self._root_client is None and self.sub_model == self.model:
            sub = root
        else:
            sub = make_client(self.sub_model, temperature=cfg.temperature,
                              max_tokens=cfg.max_sub_tokens, cache=cache)
        self._root_client, self._sub_client = root, sub
        return root, sub

    def _budget(self) -> Budget:
        c = self.config
        return Budget(c.max_llm_calls, c.max_tokens, c.max_cost_usd, c.max_seconds)

    def _run(self, question: str, variables: dict[str, Any], executor: Executor,
             root: LanguageModel, sub: LanguageModel, ledger: UsageLedger,
             guard: BudgetGuard, depth: int,
             continuation: Continuation | None = None) -> RLMResult:
        """One run (or child run at ``depth``) on ready clients; never raises for
        errors of the model, its code or the budget: they end the run with a
        ``stopped_by`` reason (see :meth:`run`)."""
        with tracing.run_span(question, getattr(root, "model", ""), depth) as sp:
            result = self._run_traced(question, variables, executor, root, sub, ledger, guard,
                                      depth, continuation)
            if sp is not None:
                sp.set_attributes({**tracing.usage_attributes(result),
                                   "rlm.stopped_by": result.stopped_by,
                                   "rlm.steps": result.steps})
        return result

    def _run_traced(self, question: str, variables: dict[str, Any], executor: Executor,
                    root: LanguageModel, sub: LanguageModel, ledger: UsageLedger,
                    guard: BudgetGuard, depth: int,
                    continuation: Continuation | None) -> RLMResult:
        """:meth:`_run`'s body, inside its ``invoke_agent`` span."""
        run = self._start(question, variables, executor, root, sub, ledger, guard, depth)
        if continuation is not None:
            run.forced_reply = seed_run(run, continuation, self.config)
            run.first_step = continuation.from_step
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
            restore_names(run.ns, run.reserved, None, run.inputs)
            run.result.calls = list(ledger.calls)
            run.result.exchanges = list(guard.recorder.exchanges)
            run.result.root_prompts = list(guard.recorder.root_prompts)
            run.result.seconds = time.perf_counter() - run.start
            run.notify("run_finished", {"result": run.result})
        return run.result

    def _start(self, question: str, variables: dict[str, Any], executor: Executor,
               root: LanguageModel, sub: LanguageModel, ledger: UsageLedger,
               guard: BudgetGuard, depth: int) -> RunState:
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
                         child_runner=child_runner(self, root, sub, ledger, guard, depth),
                         client_kwargs={"temperature": cfg.temperature,
                                        "max_tokens": cfg.max_sub_tokens,
                                        "cache": cfg.cache is not None},
                         data_name="context" if "context" in variables
                         else next(iter(variables), "context"))
        run = RunState(question=question, executor=executor, root=root, ledger=ledger,
                   guard=guard, depth=depth, ns=ns, tools=tools,
                   inputs=dict(variables) if cfg.protect_inputs else {},
                   reserved=tools.functions(),
                   result=RLMResult(question=question, variables=metas, depth=depth,
                                    model=getattr(root, "model", ""),
                                    sub_model=getattr(sub, "model", "")),
                   first=task_message(question, metas, cfg.max_iterations, variables),
                   prompt_chars=prompt_chars(cfg, root),
                   policy=PolicyRegistry.get_termination(cfg.termination,
                                                         config=policy_config(cfg)),
                   observer=self.observer, start=start)
        ns.update(run.reserved)
        tools.notify = run.notify
        run.notify("run_started", {"question": question, "variables": metas,
                                   "max_iterations": cfg.max_iterations,
                                   "model": run.result.model})
        return run

    def _loop(self, run: RunState) -> None:
        """Steps until the policy accepts an answer, too many steps fail in a row, or
        ``max_iterations`` is reached (then one last "answer now" call)."""
        cfg = self.config
        for step in range(run.first_step, cfg.max_iterations + 1):
            outcome = self._step(run, step)
            if after_step(self.config, run, step, outcome):
                return
        if run.pending is not None:  # the check step did not answer: keep the first answer
            run.result.answer = run.pending.answer
            run.result.answer_value = run.pending.answer_value
            run.result.stopped_by = "final"
            return
        run.result.stopped_by = "max_iterations"
        answer_now(self.config, run, self.replay)

    def _step(self, run: RunState, step: int) -> StepOutcome:
        """One step: ask the root model (resampling a repeated reply once), run its
        code, restore reserved names, append the history entry, tell the observer.

        Raises:
            BudgetExceeded: the budget ran out before or during the step.
        """
        cfg = self.config
        run.guard.check()
        if run.depth == 0:
            run.guard.recorder.step = step
        run.notify("model_call", {"step": step})
        messages = build_messages(run.first, run.turns, cfg.history_window, run.prompt_chars)
        if run.forced_reply is not None:  # a continued run's edited step: no model call
            reply, run.forced_reply = run.forced_reply, None
        else:
            reply = reply_text(run.root, messages, role="root", stop=cfg.stop_sequences())
        if cfg.resample_temperature and run.pending is None and run.first_step != step and \
                repeats(cfg, reply, run.seen_code):  # a check step may repeat its FINAL
            try:
                reply = reply_text(run.root, messages, role="root", stop=cfg.stop_sequences(),
                                    temperature=cfg.resample_temperature)
            except BudgetExceeded:  # no budget for a second sample: run the first
                pass
        with tracing.step_span(step, run.depth):
            outcome = run_reply(reply, run.executor, run.tools, step, cfg, run.notify)
        restore_names(run.ns, run.reserved, outcome, run.inputs)
        record_step(self.replay, run, step, outcome)
        if run.guard.exceeded or run.guard.overspent():
            raise BudgetExceeded(run.guard.exceeded)
        return outcome
