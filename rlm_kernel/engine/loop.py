"""The RLM loop: prompt, model reply, code, execution, history, termination.

Imports nothing from Jupyter.  The loop runs over an :class:`Executor` (plain
``exec`` here, the kernel's shell in the kernel) and a :class:`LanguageModel`
(litellm).  Shape after DSPy's ``predict/rlm.py`` and the RLM paper's
reference loop: one root-model call per step, at most ``max_iterations``
steps, then one last "answer now" call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from ..executors import Executor, PlainExecutor
from ..models import LanguageModel, LLMError, UsageLedger, make_client
from ..policies import ActionResult, PolicyContext, PolicyRegistry
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
        cfg = self.config
        start = time.perf_counter()
        if not isinstance(root, GuardedClient):  # every call asks the guard, whoever makes it
            guarded = GuardedClient(root, guard)
            sub = guarded if sub is root else GuardedClient(sub, guard)
            root = guarded
        ns = executor.namespace
        ns.update(variables)
        inputs = dict(variables) if cfg.protect_inputs else {}
        metas = [REPLVariable.from_value(n, v, preview_length=cfg.preview_chars)
                 for n, v in variables.items()]
        tools = RunTools(sub, guard, ns, depth=depth,
                         max_concurrency=cfg.max_concurrency,
                         child_runner=self._child_runner(root, sub, ledger, guard, depth),
                         client_kwargs={"temperature": cfg.temperature,
                                        "max_tokens": cfg.max_sub_tokens},
                         data_name="context" if "context" in variables
                         else next(iter(variables), "context"))
        reserved = tools.functions()
        ns.update(reserved)
        result = RLMResult(question=question, variables=metas, depth=depth,
                           model=getattr(root, "model", ""), sub_model=getattr(sub, "model", ""))
        first = task_message(question, metas, cfg.max_iterations, variables)
        turns: list[dict[str, str]] = []
        history = REPLHistory()
        def notify(kind: str, data: dict[str, Any]) -> None:
            if self.observer is None:
                return
            base: dict[str, Any] = {"depth": depth, "elapsed": time.perf_counter() - start}
            if kind != "step_output":  # frequent; totals cost O(calls)
                base["totals"] = ledger.totals()
            emit(self.observer, Event(kind, {**base, **data}))

        tools.notify = notify
        notify("run_started", {"question": question, "variables": metas,
                               "max_iterations": cfg.max_iterations, "model": result.model})
        consecutive_failures = 0
        prompt_chars = self._prompt_chars(root)
        seen_code: dict[str, int] = {}
        pending: StepOutcome | None = None  # a FINAL awaiting its check step
        policy = PolicyRegistry.get_termination(cfg.termination, config=self._policy_config())
        try:
            for step in range(1, cfg.max_iterations + 1):
                guard.check()
                notify("model_call", {"step": step})
                messages = build_messages(first, turns, cfg.history_window, prompt_chars)
                reply = _reply_text(root, messages, role="root", stop=cfg.stop_sequences())
                if cfg.resample_temperature and pending is None and \
                        self._repeats(reply, seen_code):  # a check step may repeat its FINAL
                    try:
                        reply = _reply_text(root, messages, role="root",
                                            stop=cfg.stop_sequences(),
                                            temperature=cfg.resample_temperature)
                    except BudgetExceeded:  # no budget for a second sample: run the first
                        pass
                tools.step_calls = []
                outcome: StepOutcome = run_reply(reply, executor, tools, step, cfg, notify)
                self._restore(ns, reserved, outcome, inputs)
                history = history.append(reasoning=outcome.reasoning, code=outcome.code,
                                         output=outcome.output, execution_time=outcome.seconds,
                                         llm_calls=list(tools.step_calls))
                result.history = history
                notify("step_finished", {"step": step, "outcome": outcome,
                                         "entry": history.entries[-1]})
                if guard.exceeded or guard.overspent():
                    raise BudgetExceeded(guard.exceeded)
                done, answer = self._check_policy(policy, outcome, question, step, ns)
                check = (done and outcome.final and pending is None and cfg.verify_answer
                         and step < cfg.max_iterations)
                if done and not check:
                    result.answer_value = outcome.answer_value if outcome.final else answer
                    result.answer, result.stopped_by = answer, "final"
                    return result
                turns.append({"role": "assistant", "content": outcome.reply_for_history})
                if check:  # one look back before the answer is accepted
                    pending = outcome
                    text = self._check_message(question, outcome, history, step)
                    notify("answer_check", {"step": step, "answer": outcome.answer})
                else:
                    text = next_message(outcome.code, outcome.output, outcome.success, step + 1,
                                        cfg.max_iterations, limit=cfg.max_output_chars,
                                        repeated_from=seen_code.get(outcome.code),
                                        error=outcome.error_for_model,
                                        question=question if cfg.restate_question else None)
                seen_code.setdefault(outcome.code, step)
                turns.append({"role": "user", "content": text})
                consecutive_failures = 0 if outcome.success and outcome.code else \
                    consecutive_failures + 1
                if cfg.max_consecutive_errors and consecutive_failures >= cfg.max_consecutive_errors:
                    result.stopped_by = "error"
                    result.error = f"{consecutive_failures} steps in a row failed or ran no code"
                    return result
            if pending is not None:  # the check step did not answer: keep the first answer
                result.answer, result.answer_value = pending.answer, pending.answer_value
                result.stopped_by = "final"
                return result
            result.stopped_by = "max_iterations"
            self._answer_now(result, first, turns, root, executor, tools, guard, notify)
            return result
        except BudgetExceeded as exc:
            result.stopped_by, result.error = "budget", guard.exceeded or str(exc)
            return result
        except KeyboardInterrupt:
            result.stopped_by, result.error = "interrupt", "interrupted by the user"
            return result
        except LLMError as exc:
            result.stopped_by, result.error = "error", str(exc)
            return result
        except Exception as exc:  # noqa: BLE001 - a bug must not lose the trajectory
            result.stopped_by = "error"
            result.error = f"internal error: {type(exc).__name__}: {exc}"
            return result
        finally:
            self._restore(ns, reserved, None, inputs)
            result.calls = list(ledger.calls)
            result.seconds = time.perf_counter() - start
            notify("run_finished", {"result": result})


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

    def _check_policy(self, policy: Any, outcome: StepOutcome, question: str, step: int,
                      ns: Any) -> tuple[bool, str | None]:
        cfg = self.config
        if outcome.final:
            action = ActionResult(action_type="final", success=True, output=outcome.answer or "")
        else:  # a traceback echoes the failed line: a FINAL there is not an answer
            action = ActionResult(action_type="code", success=outcome.success,
                                  output=_before_traceback(outcome.output))
        ctx = PolicyContext(task=question, step=step, max_steps=cfg.max_iterations,
                            variables=ns)
        return policy.should_terminate(action, ctx)

    def _answer_now(self, result: RLMResult, first: str, turns: list[dict[str, str]],
                    root: LanguageModel, executor: Executor, tools: RunTools,
                    guard: BudgetGuard, notify: Callable[[str, dict[str, Any]], None]) -> None:
        cfg = self.config
        guard.check()
        messages = build_messages(first, turns, cfg.history_window,
                                  self._prompt_chars(root))
        messages.append({"role": "user", "content": answer_now_message(cfg.max_iterations)})
        reply = _reply_text(root, messages, role="final", stop=cfg.stop_sequences())
        tools.step_calls = []
        outcome = run_reply(reply, executor, tools, cfg.max_iterations + 1, cfg, notify,
                            final_only=True)
        if outcome.code:  # the FINAL call ran: it is part of the trajectory
            result.history = result.history.append(
                reasoning=outcome.reasoning, code=outcome.code, output=outcome.output,
                execution_time=outcome.seconds, llm_calls=list(tools.step_calls))
            notify("step_finished", {"step": cfg.max_iterations + 1, "outcome": outcome,
                                     "entry": result.history.entries[-1]})
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
