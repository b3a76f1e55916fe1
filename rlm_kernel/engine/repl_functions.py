"""The functions a run puts in the REPL namespace for model code to call.

``llm_query``, ``llm_query_batched``, ``rlm_query``, ``FINAL``, ``FINAL_VAR``
and ``SHOW_VARS`` are reserved names: the engine restores them after any step
that rebinds or deletes them.  Their limits (budget, recursion depth,
concurrency) are read from this host-side object, not from the namespace.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NoReturn

from ..context import DataHelper, current_namespace, data_helpers
from ..executors import FolderBaseline, FolderDiffError, Redactor, host_thread, sub_agent_refusal
from ..mcp import MCPToolError
from ..mcp.groups import ToolGroup
from ..models import LanguageModel, LLMError, UsageLedger, make_client
from ..termination import FINAL, FINAL_VAR, FinalOutput
from .answer.final import FinalRecord
from .answer.text import describe_variable
from .budget import Budget, BudgetExceeded, BudgetGuard
from .events import Event, SubCall
from .names import RESERVED_NAMES, SESSION_NAMES, user_variables
from .prompts import (
    SUB_CALL_SYSTEM_PROMPT,
    prompt_text,
    sub_call_error,
    sub_call_prompt,
    sub_run_failed,
)
from .replay.recording import Recorder
from .result import ChildRun, RLMResult, child_runs
from .services import compose_client
from .session.mcp_tools import CALL_NAME, RunTools

__all__ = ["REPLFunctions", "RESERVED_NAMES", "SESSION_NAMES", "session_functions",
           "user_variables"]

_RECORD_CHARS = 500  # characters of a sub-call's prompt/response kept in the step record


class REPLFunctions:
    """The namespace functions of one run, bound to its clients and limits.

    Args:
        sub_client: model used by ``llm_query`` (the sub model).
        guard: the run's budget guard, checked before every call.
        namespace: the REPL namespace (for ``SHOW_VARS``).
        depth: recursion depth of the owning run (0 = top level).
        max_concurrency: threads used by ``llm_query_batched``.
        child_runner: ``callable(prompt, context) -> RLMResult | None`` that runs a
            child RLM one level deeper and returns its result, or returns None beyond
            the host's depth limit; supplied by the engine.
        client_kwargs: arguments for clients built for ``llm_query(model=...)``.
        data_name: the variable ``search`` and ``split_documents`` read when no
            data is passed (the run's first input variable, usually ``context``).
        compose: wraps a client built for ``llm_query(model=...)`` as the run's own
            are (:meth:`~rlm_kernel.engine.services.RunServices.compose`); None:
            :func:`~rlm_kernel.engine.services.compose_client` over ``guard`` and a
            recorder of its own.
        baseline: the working folder as the run found it (``finish``'s diff), or None.
        tools: the run tree's MCP tools (``mcp_call`` and the servers' groups), or None.
    """

    def __init__(self, sub_client: LanguageModel, guard: BudgetGuard,
                 namespace: MutableMapping[str, Any], *, depth: int,
                 max_concurrency: int,
                 child_runner: Callable[[str, Any], RLMResult | None] | None = None,
                 client_kwargs: dict[str, Any] | None = None,
                 data_name: str = "context",
                 compose: Callable[[LanguageModel], LanguageModel] | None = None,
                 baseline: FolderBaseline | None = None,
                 tools: RunTools | None = None) -> None:
        self.data_name = data_name
        self.tools = tools
        self.baseline = baseline
        self._finished: dict[str, Any] | None = None  # the step's finish(), computed once
        self.sub_client = sub_client
        self.guard = guard
        self.namespace = namespace
        self.depth = depth
        self.max_concurrency = max(1, max_concurrency)
        self.child_runner = child_runner
        self.client_kwargs = dict(client_kwargs or {})
        self.compose = compose or (lambda client: compose_client(client, guard, Recorder()))
        self.step_calls: list[dict[str, Any]] = []
        self.step = 0  # the step whose code is running (set by the code runner)
        self.children: list[ChildRun] = []  # the child runs of rlm_query, whole tree
        self._child_count = 0
        self.finals = FinalRecord()  # the step's first FINAL, kept host-side
        self.redact = Redactor()  # secrets out of sub-call records and answers
        self.active_subcalls = 0
        self.notify: Callable[[Event], None] | None = None  # the run's, for sub_call
        self._clients: dict[str, LanguageModel] = {}
        self._lock = threading.Lock()
        # run where model code runs (copied into an isolated worker), not on the host
        self.helpers: dict[str, DataHelper] = {
            **data_helpers(data_name, namespace),
            "SHOW_VARS": DataHelper(show_vars, data_name, namespace)}

    def functions(self) -> dict[str, Any]:
        """The reserved names and the callables to bind them to (``mcp_call`` raises
        :class:`~rlm_kernel.mcp.MCPToolError` in a run with no MCP servers)."""
        return {
            "llm_query": self.llm_query,
            "llm_query_batched": self.llm_query_batched,
            "rlm_query": self.rlm_query,
            "FINAL": self.final,
            "FINAL_VAR": self.final_var,
            CALL_NAME: self.mcp_call,
            **self.helpers,
        }

    def tool_groups(self) -> dict[str, ToolGroup]:
        """The MCP servers' tool groups by server name, calling :meth:`mcp_call`; empty
        without MCP tools."""
        return self.tools.groups(self.mcp_call) if self.tools is not None else {}

    def mcp_call(self, server: str, tool: str, arguments: Any = None) -> Any:
        """``mcp_call(server, tool, arguments)``: an MCP tool call made by the host
        (:meth:`~rlm_kernel.engine.session.mcp_tools.RunTools.call`), told to this run's
        step cell.

        Raises:
            MCPToolError: the call was refused or failed (one readable message).
            BudgetExceeded: the run's budget is used up.
        """
        if self.tools is None:
            raise MCPToolError("no MCP servers are configured (mcp_servers)")
        return self.tools.call(server, tool, arguments, step=self.step, depth=self.depth,
                               notify=self.notify)

    def final(self, answer: Any) -> NoReturn:
        """``FINAL(answer)``: record ``answer`` host-side, then raise
        :class:`~rlm_kernel.termination.FinalOutput`.  The record is kept even if
        model code catches the exception (``except BaseException: pass``)."""
        try:
            FINAL(answer)
        except FinalOutput as exc:
            self.finals.keep(exc.output)
            raise

    def final_var(self, variable_name: str) -> NoReturn:
        """``FINAL_VAR(name)``: as :meth:`final`, for the variable called ``name``.

        Raises:
            TypeError: ``variable_name`` is not a ``str``.
        """
        try:
            FINAL_VAR(variable_name)
        except FinalOutput as exc:
            self.finals.keep(exc.output)
            raise

    def finish(self, message: str | None = None) -> NoReturn:
        """``finish(message=None)``, bound in a working-folder run: end the run as
        ``FINAL`` does, its answer ``message`` and the folder's change as a unified diff.
        The diff is computed here, by the host, from the folder as the run found it
        (:class:`~rlm_kernel.executors.folder_diff.FolderBaseline`): model code cannot
        hand in one of its own.  The record is kept host-side as a ``FINAL``'s is:
        ``{"type": "finish", "message": str | None, "diff": str | None, "problem": str |
        None}`` (``problem``: why there is no diff, e.g. git is not installed).

        Raises:
            FinalOutput: the run's end (always, once the arguments are right).
            PermissionError: the run is a sub-agent's (an ``rlm_query`` child): only the
                top-level run finishes (spec 003).
            TypeError: ``message`` is not a ``str`` or None.
        """
        if self.baseline is None:
            raise PermissionError(sub_agent_refusal("finish"))
        if message is not None and type(message) is not str:
            raise TypeError(f"finish: message is a str or None, not {type(message).__name__}")
        if self._finished is not None:  # called again in the step: the same end, no new diff
            raise FinalOutput(self._finished)
        try:
            diff, problem = self.baseline.diff(), None
        except FolderDiffError as exc:
            diff, problem = None, str(exc)
        output = {"type": "finish", "message": message, "diff": diff, "problem": problem}
        self._finished = output
        self.finals.keep(output)
        raise FinalOutput(output)

    def take_final(self) -> dict[str, Any] | None:
        """The first ``FINAL``/``FINAL_VAR`` recorded since the last call, or None
        (:meth:`~rlm_kernel.engine.answer.final.FinalRecord.take`)."""
        self._finished = None
        return self.finals.take()

    def _client(self, model: str | None) -> LanguageModel:
        if not model:
            return self.sub_client
        with self._lock:
            if model not in self._clients:
                client = make_client(model, **self.client_kwargs)
                client.check()
                client = self.compose(client)
                client.ledger = self.sub_client.ledger
                client.depth = self.depth
                self._clients[model] = client
            return self._clients[model]

    def llm_query(self, prompt: str, model: str | None = None) -> str:
        """Ask the sub model one question and return its reply text.

        Args:
            prompt: the full request, including any text to read (characters).
            model: optional litellm model string for this call only.

        Raises:
            LLMError: the call failed (the model code sees the message).
            BudgetExceeded: a budget limit is reached; the run stops.
            TypeError: ``model`` is not a model name (``str``) or None, or ``prompt``
                is a value nested too deep to be made text.
        """
        if model is not None and not isinstance(model, str):
            raise TypeError("llm_query: model is a model name such as "
                            f"'openai/gpt-4.1-mini' (a str) or None, not {type(model).__name__}")
        self.guard.check()
        records = self.step_calls  # the step that makes the call owns its record
        client = self._client(model)
        prompt = prompt_text(prompt)
        messages = [{"role": "system", "content": SUB_CALL_SYSTEM_PROMPT},
                    {"role": "user", "content": self.redact(prompt)}]
        with self._lock:
            self.active_subcalls += 1
        try:
            completion = client.complete(messages, role="sub",
                                         **({"depth": self.depth} if self.depth else {}))
        finally:
            with self._lock:
                self.active_subcalls -= 1
        call = completion.call
        records.append({
            "prompt": self.redact(prompt)[:_RECORD_CHARS],
            "response": self.redact(completion.text)[:_RECORD_CHARS],
            "model": call.model,
            "seconds": round(call.seconds, 3),
            "prompt_tokens": call.prompt_tokens,
            "completion_tokens": call.completion_tokens,
            "cost_usd": call.cost_usd,
            "cached": bool(getattr(call, "cached", False)),
        })
        if self.notify is not None:
            self.notify(SubCall(done=len(records), active=self.active_subcalls))
        return completion.text

    def llm_query_batched(self, prompts: list[str], model: str | None = None) -> list[str]:
        """Ask the sub model several questions concurrently; replies in input order.

        At most ``max_concurrency`` requests are in flight.  A prompt whose call
        fails yields the string ``"Error: <reason>"`` in its slot instead of
        raising, so one failure does not lose the other answers.

        Raises:
            BudgetExceeded: the budget was already used up before the batch.
            TypeError: ``prompts`` is a single text or not a collection of them.
        """
        if isinstance(prompts, (str, bytes)) or not hasattr(prompts, "__iter__"):
            raise TypeError("llm_query_batched takes a list of prompts (one str each), "
                            f"not {type(prompts).__name__}; one prompt: llm_query(prompt)")
        prompts = list(prompts)
        self.guard.check()

        def one(prompt: str) -> str:
            try:
                return self.llm_query(prompt, model=model)
            except LLMError as exc:
                return sub_call_error(str(exc))
            except Exception as exc:  # noqa: BLE001 - one bad prompt must not sink the batch
                return sub_call_error(f"{type(exc).__name__}: {exc}")
            except BaseException as exc:  # BudgetExceeded: tell this slot, keep the rest
                return sub_call_error(str(exc))

        if len(prompts) <= 1:
            return [one(p) for p in prompts]
        workers = min(self.max_concurrency, len(prompts))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rlm-subcall",
                                initializer=host_thread) as pool:
            return list(pool.map(one, prompts))

    def rlm_query(self, prompt: str, context: Any = None) -> str:
        """Run a child RLM on ``prompt`` with its own REPL holding ``context``.

        Beyond the host's ``max_depth`` the call is answered by ``llm_query``
        instead (with ``context`` appended as text when given), as in the
        reference RLM.  Returns the child's answer, or ``"Error: ..."`` when
        the child ended without one.  The child's run is kept (:attr:`children`, a
        :class:`~rlm_kernel.engine.result.ChildRun` with the step whose code called
        this, its conversation and its own children), whatever it ended with.

        Raises:
            BudgetExceeded: the budget was used up before the call, or the child ran
                out of it (the parent stops too).
        """
        self.guard.check()
        step = self.step  # the host's count, not model code's
        res = None if self.child_runner is None \
            else self.child_runner(prompt_text(prompt), context)
        if res is None:  # no runner, or the host's depth limit is reached
            return self.llm_query(sub_call_prompt(prompt, context))
        with self._lock:
            self._child_count += 1
            self.children.extend(child_runs(str(self._child_count), step, res))
        if res.stopped_by == "budget":
            raise BudgetExceeded(res.error or "budget used up")
        if res.answer is None:
            return sub_run_failed(res.stopped_by, res.error)
        return res.answer


def show_vars() -> None:
    """``SHOW_VARS()``: print the metadata (name, type, length, preview) of the data
    variables of the namespace it is called in (a :class:`DataHelper`'s)."""
    namespace = current_namespace()
    variables = user_variables(namespace) if namespace is not None else {}
    text = "\n\n".join(describe_variable(n, v, preview_length=100).format()
                       for n, v in variables.items()) or "(no variables)"
    print(text)
    return None  # printed already; returning it would print twice at a trailing call


def session_functions(sub_model: str | None, namespace: MutableMapping[str, Any],
                      max_concurrency: int = 16,
                      recorded: list[dict[str, Any]] | None = None,
                      router: Any = None) -> REPLFunctions:
    """The REPL functions for use outside any run (a re-run exported notebook, a cell of
    the user's): ``llm_query`` & co. on ``sub_model`` (a litellm model string, or a
    model_name of the ``router`` fleet; None = the embedded model), with a fresh usage
    ledger and no budget.  With ``recorded`` (a run's exchanges, see
    :mod:`rlm_kernel.engine.replay.recording`), calls the record holds are answered from
    it and only others reach the model; its MCP tool calls (role ``tool``) are answered
    from it too, with no server (:meth:`REPLFunctions.tool_groups`).

    Raises:
        LocalModelError: ``sub_model`` names no embedded model.
        LLMError: the ``router`` fleet cannot be read or lacks ``sub_model``.
    """
    from .replay.recording import RecordedFirst

    ledger = UsageLedger()
    sub = RecordedFirst(recorded, lambda: make_client(sub_model, router=router)) \
        if recorded else make_client(sub_model, router=router)
    sub.ledger = ledger
    guard = BudgetGuard(Budget(), ledger, time.monotonic())
    tools = RunTools(None, guard, recorded=recorded) \
        if recorded and any(e.get("role") == "tool" for e in recorded) else None
    return REPLFunctions(sub, guard, namespace, depth=0, max_concurrency=max_concurrency,
                         tools=tools)

