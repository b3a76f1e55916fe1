"""The public entry point of the engine: :class:`RLM` builds the model clients, the
run's services (:class:`~rlm_kernel.engine.services.RunServices`: the clients composed
with redaction, record, budget and trace, the ledger, the budget guard) and the run, and
returns its :class:`RLMResult`.  The loop itself, one step top to bottom, is
:class:`~rlm_kernel.engine.run.Run`.

Imports nothing from Jupyter.  A run works over an :class:`Executor` (plain ``exec``
here, the kernel's shell in the kernel) and a :class:`LanguageModel` (litellm).  Shape
after DSPy's ``predict/rlm.py`` and the RLM paper's reference loop: one root-model call
per step, at most ``max_iterations`` steps, then one last "answer now" call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor as FuturesExecutor
from contextlib import contextmanager
from typing import Any

from ..executors import Executor, WorkFolder, executor_for, host_thread
from ..models import LanguageModel, configure_cache, is_embedded, make_client, tracing
from .answer.types import as_answer_type
from .budget import Budget
from .config import RLMConfig
from .events import Observer
from .mapper import map_rollouts, map_runner
from .replay.recording import ReplayModel, load_recording
from .replay.resume import Continuation
from .result import RLMResult
from .run import Run
from .services import RunServices
from .session.conversation import Conversation
from .session.task import TaskSpec, check_tools
from .strategies.candidates import CandidateRuns
from .strategies.children import child_runner

__all__ = ["RLM"]

class RLM:
    """A Recursive Language Model: a root model working in a persistent REPL.

    Args:
        model: litellm model string of the root model (``config.model``); None: the
            config's, else ``$RLM_MODEL``, else the embedded local model
            (:meth:`RLMConfig.models`).
        sub_model: model for ``llm_query`` (``config.sub_model``); None: the config's,
            else ``$RLM_SUB_MODEL``, else the root model.
        config: an :class:`RLMConfig`; keyword arguments override its fields
            (``max_iterations``, ``max_depth``, ``step_timeout`` ...; None sets an
            optional one to none).
        observer: ``callable(Event)`` told about each step as it happens.
        root_client: a ready :class:`LanguageModel` for the root model, used instead
            of building a litellm client (scripted models in tests).
        sub_client: the same for the sub-model of ``llm_query``.
        tools: the user's functions offered to the model in every run: a list of
            functions (by ``__name__``) or a dict ``{name: function}``; each is bound in
            the REPL and told to the model with its signature and the first paragraph
            of its docstring (:func:`~rlm_kernel.engine.session.task.describe_tool`).
        replay: a recorded run to answer from instead of any model (an
            :class:`RLMResult`, its ``to_dict()``, a ``.json`` or ``.ipynb`` path; see
            :mod:`rlm_kernel.engine.replay.recording`); the result's ``diverged_at`` is the
            first step whose output differs from the record's.

    Raises:
        TypeError, ValueError: a tool is not callable, or its name is reserved
            (:func:`~rlm_kernel.engine.session.task.check_tools`).

    After every step the termination policy (``config.termination``) is asked with
    :func:`~rlm_kernel.engine.judging.action_result` (``output``: the answer of a step that called ``FINAL``,
    else the model's own words of the step, never what its code printed; ``metadata``:
    step, seconds, sub-call count, output length, success) and :func:`~rlm_kernel.engine.judging.policy_context` (``history``: the steps so far; ``metrics``:
    steps, calls, tokens, USD, seconds, last success).  Code reports a reward or a
    confidence for its step by binding ``RLM_REWARD`` / ``RLM_CONFIDENCE`` to a number
    (:data:`~rlm_kernel.engine.step.SIGNAL_NAMES`); the host takes them out of the
    namespace after the step into ``metrics["last_reward"]`` and
    ``metrics["confidence"]`` / ``metadata["confidence"]``, for the
    ``reward_threshold`` and ``confidence`` policies.

    With ``config.candidates`` > 1 a run is up to that many independent trajectories
    and a vote over their answers (:mod:`rlm_kernel.engine.strategies.candidates`); a replay
    replays the recorded (chosen) trajectory alone.

    Example::

        RLM(model="openai/gpt-4.1-mini").run("Which chapter ...?", context=book)
    """

    def __init__(self, model: str | None = None, sub_model: str | None = None, *,
                 config: RLMConfig | None = None, observer: Observer | None = None,
                 root_client: LanguageModel | None = None,
                 sub_client: LanguageModel | None = None, replay: Any = None,
                 tools: Any = None, **overrides: Any) -> None:
        given = {k: v for k, v in (("model", model), ("sub_model", sub_model)) if v}
        self.config = (config or RLMConfig()).replace(**given, **overrides)
        self.replay = None if replay is None else load_recording(replay)
        self.model, self.sub_model = self.config.models()
        self.observer = observer
        self._root_client = root_client
        self._sub_client = sub_client
        self._clients_given = root_client is not None or sub_client is not None
        self.tools = check_tools(tools)

    # -- public -------------------------------------------------------------------------
    def run(self, question: str, context: Any = None, *, executor: Executor | None = None,
            variables: Mapping[str, Any] | None = None,
            continuation: Continuation | None = None, output_type: Any = None,
            history: Conversation | None = None, tools: Any = None,
            protected: Any = None, **more: Any) -> RLMResult:
        """Answer ``question`` by letting the model work on the given variables.

        Args:
            question: the task, in natural language.
            context: the main input (any Python value; a str, a dict of files...),
                bound to ``context`` in the REPL.  Omitted if None.
            executor: where code runs (default: a new one of ``config.executor``'s
                kind, isolated when that is None, closed when the run ends,
                :func:`~rlm_kernel.executors.executor_for`); its namespace is kept.
            variables: further REPL variables the model is told about, by name
                (for names that clash with this method's parameters).
            continuation: continue an earlier run from one of its steps, with that
                step's code edited or not (see :mod:`rlm_kernel.engine.replay.resume`); the
                earlier steps are not run again.
            output_type: the type the answer must have: a Python type (``int``,
                ``list[str]``, a dataclass, a TypedDict, a pydantic model), its text
                (``"dict[str, int]"``), a JSON Schema dict, or an
                :class:`~rlm_kernel.engine.answer.types.AnswerType`.  The model is told
                the type; a ``FINAL`` value that fails validation goes back to it as
                a failed step; ``result.answer_value`` is of the type.
            history: the session's earlier tasks
                (:class:`~rlm_kernel.engine.session.conversation.Conversation`): the model is
                told them and ``rlm_history`` holds them.  Record this run's task with
                ``history.record(result, executor.namespace)`` to go on.
            tools: more tools for this run (as in the constructor).
            protected: names of the given variables restored if model code rebinds
                or deletes them (default: all, with ``config.protect_inputs``).
            **more: further REPL variables, as keywords (names used by this
                method's parameters go through ``variables``).

        Returns:
            An :class:`RLMResult`; errors end the run with ``stopped_by="error"``
            and a readable ``error`` instead of raising, the executor's own included
            (its worker died and could not start again, in a step or in the clean-up
            after the run: the steps so far and an accepted answer are kept).

        Raises:
            LLMError: before the run, if the model is unknown or a key is missing.
            TypeError, ValueError: ``output_type`` is not a type pydantic can check,
                a tool is not callable or has a reserved name, or ``config.workdir``
                is not a folder.
            WorkerError: before the run, the isolated executor could not start
                (:class:`~rlm_kernel.executors.sandbox.SandboxUnavailable`: its
                sandbox cannot be built here) or take the inputs (one too large for
                ``memory_limit``); the message says what to do.
        """
        task = self._task(output_type, history, tools, protected)
        variables = {**({} if context is None else {"context": context}), **(variables or {}),
                     **more}
        services = self._services()
        with self._executor(executor, task) as executor:
            try:
                return self._run(question, variables, executor, services, continuation, task)
            finally:
                services.guard.close()  # nothing spends the run's budget once it returned

    def map(self, questions: Sequence[str], contexts: Any = None, *,
            executor: FuturesExecutor | None = None, returns: Any = None,
            rollouts: int | None = None, held_back: str | None = None,
            reward: str | None = None, keep_copies: bool = False) -> list[Any]:
        """Answer many questions, each an independent run with this RLM's settings, on
        ``executor`` (:func:`rlm_kernel.batch.mapping.map_runs`, reached through
        :mod:`~rlm_kernel.engine.mapper`).

        Args:
            questions: the tasks (a str alone is one task).
            contexts: one context per question (any picklable values, or
                :class:`~rlm_kernel.batch.ContextRef` read on the worker), or
                one value for all, or None.
            executor: any ``concurrent.futures.Executor``: Dask's
                ``client.get_executor()``, a ``ThreadPoolExecutor``, a
                ``ProcessPoolExecutor``; None: a Dask ``LocalCluster`` (one worker
                process per CPU, at most one per question), closed at the end.
            returns: the answers' type, as :meth:`run`'s ``output_type`` (text, a
                type or a JSON Schema dict; it must pickle for process workers).
            rollouts: rollouts for training: each question this many times, each attempt
                in its own copy of ``workdir`` (which must be set), scored after its
                loop by the host (docs: "Rollouts for training",
                :func:`rlm_kernel.batch.rollouts.map_rollouts`); None: each once.
            held_back: with ``rollouts``: a folder of tests copied into each copy after
                its loop, the reward (the share of them that pass).
            reward: with ``rollouts``: a command that scores a copy instead.
            keep_copies: with ``rollouts``: keep each attempt's copy.

        Returns:
            One :class:`RLMResult` per question, in input order; a failed task's
            result has ``stopped_by="error"`` and the reason, nothing is raised for it.
            With ``rollouts``: one rollout line (a dict, as ``rlm batch --rollouts``
            writes it: ``group``, ``attempt``, ``messages``, ``reward`` ...) per attempt,
            in question order then attempt order.

        Raises:
            ValueError: model clients were given as objects (``root_client``,
                ``sub_client``) or a replay: a worker builds its own from the
                settings; or the lengths differ, or ``returns`` is not a type.
            ClusterMissing: no executor given and Dask ``distributed`` is not
                installed (the message says what to install).
        """
        if self._clients_given or self.replay is not None:
            raise ValueError("map() builds each task's model clients from the settings on "
                             "its worker: give model strings, not root_client/sub_client "
                             "or a replay")
        config = self.config.replace(model=self.model, sub_model=self.sub_model)
        if rollouts is not None:
            return map_rollouts()(config, questions, contexts, rollouts=rollouts,
                                  held_back=held_back, reward=reward, executor=executor,
                                  keep_copies=keep_copies)
        return map_runner()(config, questions, contexts, executor=executor, returns=returns,
                            tools=self.tools or None)

    # -- internals ----------------------------------------------------------------------
    def _folder(self) -> WorkFolder | None:
        """The run's working folder (``config.workdir``), or None.

        Raises:
            ValueError: the folder does not exist or is not a folder."""
        if not self.config.workdir:
            return None
        try:
            return WorkFolder(self.config.workdir,
                              max_output_chars=self.config.max_output_chars,
                              pass_env=self.config.pass_env,
                              test_command=self.config.test_command,
                              test_timeout=self.config.test_timeout)
        except (FileNotFoundError, NotADirectoryError) as exc:
            raise ValueError(f"workdir: {exc}") from None

    def _task(self, output_type: Any, history: Conversation | None, tools: Any,
              protected: Any) -> TaskSpec:
        """The task's terms from :meth:`run`'s arguments: the answer's type, the earlier
        tasks, this RLM's tools and the run's, the protected names, the working folder.

        Raises:
            TypeError, ValueError: see :meth:`run`."""
        return TaskSpec(output_type=as_answer_type(output_type), history=history,
                        tools={**self.tools, **check_tools(tools)},
                        protected=None if protected is None else set(protected),
                        folder=self._folder())

    @contextmanager
    def _executor(self, given: Executor | None, task: TaskSpec) -> Iterator[Executor]:
        """``given``; or a new executor of ``config.executor``'s kind (isolated when that
        is None, :func:`~rlm_kernel.executors.executor_for`) in the task's working
        folder, closed when the run ends.

        Raises:
            WorkerError: the isolated executor could not start."""
        if given is not None:
            yield given
            return
        executor = executor_for(self.config.executor,
                                workdir=None if task.folder is None else task.folder.root,
                                isolated_options=self.config.isolated_options())
        try:
            yield executor
        finally:
            executor.close()

    def _services(self) -> RunServices:
        """The run's services on checked clients (tracing turned on first when
        ``config.callbacks`` names backends); the caller's thread is the host's.

        Raises:
            LLMError: a model is unknown or its key is missing."""
        if self.config.callbacks:
            tracing.enable(self.config.callbacks.split(","))
        host_thread()  # the caller's thread is the host's, whichever step it began in
        root, sub = self._clients()
        root.check()
        if sub is not root:
            sub.check()
        return RunServices.start(self.config, root, sub, self._budget(),
                                 observer=self.observer, replay=self.replay)

    def _clients(self) -> tuple[LanguageModel, LanguageModel]:
        cfg = self.config
        if self.replay is not None and self._root_client is None:
            self._root_client = self._sub_client = ReplayModel(self.replay)
        if self._root_client is None or self._sub_client is None:
            configure_cache(cfg.cache)  # before any client of ours calls litellm
        cache = cfg.cache is not None  # RLMConfig allows "memory", "disk" or None
        root = self._root_client or make_client(self.model, router=cfg.router,
                                                keep_alive=cfg.keep_alive,
                                                temperature=cfg.temperature,
                                                max_tokens=cfg.max_step_tokens, cache=cache)
        if self._sub_client is not None:
            sub = self._sub_client
        elif self._root_client is None and self.sub_model == self.model:
            sub = root
        else:
            sub = make_client(self.sub_model, router=cfg.router, keep_alive=cfg.keep_alive,
                              temperature=cfg.temperature,
                              max_tokens=cfg.max_sub_tokens, cache=cache)
        self._root_client, self._sub_client = root, sub
        return root, sub

    def _budget(self) -> Budget:
        """The run's limits; its time budget fits the root model when the user set
        none (:meth:`~rlm_kernel.engine.config.RLMConfig.time_budget`)."""
        c = self.config
        return Budget(c.max_llm_calls, c.max_tokens, c.max_cost_usd,
                      c.time_budget(embedded=is_embedded(self.model)))

    def _run(self, question: str, variables: dict[str, Any], executor: Executor,
             services: RunServices, continuation: Continuation | None,
             task: TaskSpec) -> RLMResult:
        """The top-level :class:`Run` on ready services (see :meth:`run`), or the
        candidates and their vote (``config.candidates`` > 1, not a replay)."""
        if services.config.candidates > 1 and self.replay is None:
            runs = CandidateRuns(question, variables, services, executor=executor, task=task)
            return runs.execute(continuation)
        run = Run(question, variables, services, executor=executor, depth=0,
                  child_runner=child_runner(services, 0, executor, task.folder), task=task)
        return run.execute(continuation)
