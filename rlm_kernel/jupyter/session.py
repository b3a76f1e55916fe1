"""The session around runs: the user's namespace lent to a run and given back,
``llm_query`` & co. outside runs, ``FINAL`` outside a run shown as an answer, and
``%rlm ...?`` kept a task.

**The user's namespace is the user's.**  A run binds the REPL's names (``llm_query``,
``FINAL``, ``search`` ... :data:`RUN_NAMES`) into the notebook's namespace for its
length only (:func:`lent_namespace`): what the user had under those names (a function
of their own called ``search``, a variable ``FINAL``) is put back when the run ends, as
is their absence, also when the run fails or is interrupted.  Outside runs the same
helpers are *fallbacks*, not names of the namespace: they are IPython builtins (the
shell's ``builtin_trap``, which also provides ``get_ipython``), so a cell that calls
``llm_query(...)``, ``search(...)`` or ``FINAL(...)`` (a re-run exported notebook)
finds them, while any name of the user's shadows them and ``user_ns`` holds only the
user's names.  During a run they are hidden: model code gets the run's own, budgeted
functions and cannot reach the session's by deleting a name.

**Only the user's variables are the user's data.**  Variables that model code made
(a run's steps, or an ``--isolated`` run's ``--results``) are tracked by
:class:`ModelVariables` for as long as the name holds what the run left and no user cell
has assigned it: they are never protected inputs, never listed to a later task's model
as the user's data, and a task with no data of the user's says so (:func:`no_data_notice`)
naming them as what they are.  ``%%rlm --new`` starts a new conversation but does not
turn them into the user's; naming one (``--context hits``) or assigning it in a cell
does.

**One session object decides a task's policy.**  :class:`NotebookSession` (one per
shell, held by the ``%rlm`` magic, read by the prose cells' hint and the RLM kernel)
owns what a task's inputs are and which of them are protected, where its model code
runs (the live namespace, or an ``--isolated`` worker closed with the task), the
conversation it continues, the model clients (:attr:`NotebookSession.client_factory`,
the seam tests use) and the teardown when the task ends, whatever way it ends.

The task cell's own execution count and the kernel status during a run are the RLM
kernel's (:class:`~rlm_kernel.jupyter.kernel.RLMKernel`), not the session's."""

from __future__ import annotations

import ast
import builtins
import logging
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from IPython.core.error import UsageError

from ..engine import RESERVED_NAMES, Conversation, RLMConfig
from ..engine.frontends import (
    HISTORY_NAME,
    SESSION_NAMES,
    SIGNAL_NAMES,
    answer_text,
    user_variables,
)
from ..termination import resolve_final_var

if TYPE_CHECKING:
    from ..engine import RLM, RLMResult
    from .frontend import NotebookExecutor
    from .isolated_steps import IsolatedSteps

__all__ = ["RUN_NAMES", "ClientFactory", "ModelVariables", "NotebookSession", "TaskPlan",
           "added_names", "assigned_names", "bind_session_functions", "final_outside_run", "lent_namespace",
           "no_data_notice", "protect_question_mark"]

log = logging.getLogger(__name__)

RUN_NAMES: tuple[str, ...] = (*RESERVED_NAMES, HISTORY_NAME, *SIGNAL_NAMES,
                              "ls", "read", "grep", "apply_patch", "bash")
"""The names a run binds in (or takes from) the namespace it runs in: the REPL's
functions, the earlier tasks' record, the step signals the host takes after each step,
and the working folder's helpers."""

_MISSING = object()


@contextmanager
def lent_namespace(shell: Any, names: tuple[str, ...] = RUN_NAMES) -> Iterator[None]:
    """Lend ``shell``'s namespace to one run: on exit, whatever way the block ends
    (an answer, an error, an interrupt), each of ``names`` is what the user had
    before the block (the same object, or absent again), and the session's helpers
    (:func:`bind_session_functions`) are hidden from builtins inside it.

    Args:
        shell: the IPython shell whose ``user_ns`` the run uses.
        names: the names to give back (default :data:`RUN_NAMES`).
    """
    ns = shell.user_ns
    saved = {name: ns.get(name, _MISSING) for name in names}
    hidden = _hide_session_builtins(shell)
    try:
        yield
    finally:
        try:
            for name, value in saved.items():
                if value is _MISSING:
                    ns.pop(name, None)
                else:
                    ns[name] = value
        finally:
            builtins.__dict__.update(hidden)


class ModelVariables:
    """The variables of a session that model code made, by name.

    A name is model-made while it holds the very object a run left under it
    (:meth:`note_run`) and no user cell has assigned, deleted or imported it since
    (:meth:`user_cell`).  The objects are held (not their ``id``), so an id cannot be
    reused by a value of the user's while the name is tracked.
    """

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

    def snapshot(self, namespace: Mapping[str, Any]) -> dict[str, Any]:
        """The data variables of ``namespace`` before a run (name -> object), to give
        :meth:`note_run`."""
        return dict(user_variables(namespace))

    def note_run(self, before: Mapping[str, Any], namespace: Mapping[str, Any],
                 inputs: Iterable[str] = ()) -> list[str]:
        """Record the data variables a run made or rebound: those of ``namespace`` that
        are new since ``before`` (:meth:`snapshot`) or hold another object, except the
        run's ``inputs`` (put back by the run if model code touched them).

        Returns:
            the names recorded, sorted.
        """
        skip = set(inputs)
        made = sorted(n for n, v in user_variables(namespace).items()
                      if n not in skip and (n not in before or before[n] is not v))
        for name in made:
            self._made[name] = namespace[name]
        if made:
            log.debug("model-made variables: %s", ", ".join(made))
        return made

    def note(self, names: Iterable[str], namespace: Mapping[str, Any]) -> None:
        """Record ``names`` (of ``namespace``) as model-made (an ``--isolated`` run's
        ``--results``, copied in)."""
        for name in names:
            if name in namespace:
                self._made[name] = namespace[name]

    def user_cell(self, source: str) -> None:
        """A user's cell is about to run: the names it assigns become the user's."""
        for name in assigned_names(source) & self._made.keys():
            del self._made[name]

    def adopt(self, names: Iterable[str]) -> None:
        """The user named these (``--context``): they are the user's from now on."""
        for name in names:
            self._made.pop(name, None)

    def names(self, namespace: Mapping[str, Any]) -> set[str]:
        """The names of ``namespace`` that still hold what model code made (the others
        are forgotten)."""
        for name in [n for n, v in self._made.items()
                     if n not in namespace or namespace[n] is not v]:
            del self._made[name]
        return set(self._made)


ClientFactory = Callable[[str | None], Any]
"""Makes the model client of one model string (``None``: the embedded model): a
:class:`~rlm_kernel.models.LanguageModel`."""


@dataclass
class TaskPlan:
    """What the session decided for one task (:meth:`NotebookSession.plan`).

    Attributes:
        key: the conversation's key of the task (the task cell's id, else the run id).
        variables: the task's inputs, by name (the user's data).
        protected: the input names put back if model code rebinds them.
        history: the conversation the task continues (None: a task of its own).
        executor: where model code runs (a ``ShellExecutor`` on the live namespace, or
            an ``IsolatedSteps`` worker the session closes when the task ends).
        isolated: whether ``executor`` is a worker of this task.
        results: names an isolated task copies back into the namespace.
        notice: what the task cell says once the run has started when the task has no
            data of the user's (:func:`no_data_notice`), else None.
    """

    key: str
    variables: dict[str, Any]
    protected: list[str]
    history: Conversation | None
    executor: NotebookExecutor
    isolated: bool = False
    results: list[str] = field(default_factory=list)
    notice: str | None = None
    removed: dict[str, Any] = field(default_factory=dict)
    """The names (and values) a task without data added and the session removed when it
    ended."""
    restored: list[str] = field(default_factory=list)
    """Names put back for a continuation (:meth:`NotebookSession.plan`'s ``restore``):
    the run's own, as if it had made them."""

    @property
    def no_data(self) -> bool:
        """Whether the task runs without data of the user's (no input, no tools, no
        working folder, no MCP servers): what its code adds to the namespace is made up, not the user's
        (:meth:`NotebookSession.task` removes it)."""
        return self.notice is not None


class NotebookSession:
    """The RLM session of one IPython shell: the policy of its tasks.

    Args:
        shell: the IPython shell whose namespace the tasks use.
        settings: the ``c.RLM`` settings (an
            :class:`~rlm_kernel.jupyter.settings.RLMSettings`; the ``%rlm`` magic): the
            sub-model of ``llm_query`` & co. outside runs.
        client_factory: makes a model client from a model string; None (the default)
            lets the engine build litellm clients.  Tests give a scripted model here.
    """

    def __init__(self, shell: Any, settings: Any = None,
                 client_factory: ClientFactory | None = None) -> None:
        self.shell = shell
        self.settings = settings
        self.client_factory = client_factory
        self.conversation = Conversation()
        """The session's earlier tasks (:mod:`rlm_kernel.engine.session.conversation`)."""
        self.made = ModelVariables()
        """The variables model code made: never the user's data nor protected inputs
        (kept across ``--new``)."""
        self.running: bool = False
        """True while a task goes (from before its widgets appear until it has ended):
        :class:`~rlm_kernel.jupyter.kernel.RLMKernel` reads it to keep the frontend's
        status busy, and the user's cell log and the prose hint skip the steps' cells."""
        self.cell_log: list[str] = []
        """The user's cells, for an export's setup cells."""
        self.set_aside: tuple[str, dict[str, Any]] | None = None
        """``(run id, {name: value})``: what the last task without data made, removed
        when it ended; ``%rlm continue`` of that run puts it back (its earlier steps are
        not run again).  Only the last such run's is kept."""
        if shell is not None:
            shell.events.register("pre_run_cell", self.log_cell)

    def log_cell(self, info: Any) -> None:
        """``pre_run_cell`` hook: remember the user's cells (not steps, not silent);
        the names a user's cell assigns are the user's from now on (:attr:`made`)."""
        if self.running:
            return
        raw = getattr(info, "raw_cell", "") or ""
        try:
            self.made.user_cell(self.shell.transform_cell(raw) if self.shell else raw)
        except Exception:  # noqa: BLE001 - IPython's transforms on any text a user typed
            self.made.user_cell(raw)
        if not getattr(info, "silent", False):
            self.cell_log.append(raw)

    # -- before a task ------------------------------------------------------------------
    def inputs(self, names: Iterable[str] | None) -> dict[str, Any]:
        """A task's inputs: the variables named (``--context``), else every data
        variable of the namespace but those model code made (:attr:`made`).

        Raises:
            UsageError: a named variable is not in the namespace."""
        ns = self.shell.user_ns
        names = list(names or ())
        missing = [n for n in names if n not in ns]
        if missing:
            raise UsageError(f"%rlm: no variable named {', '.join(missing)}")
        if names:
            return user_variables(ns, names)
        made = self.made.names(ns)
        return {n: v for n, v in user_variables(ns).items() if n not in made}

    def plan(self, key: str, config: RLMConfig, *, context: list[str] | None = None,
             new: bool = False, follow_ups: bool = True, isolated: bool = False,
             results: list[str] | None = None, has_tools: bool = False,
             restore: Mapping[str, Any] | None = None) -> TaskPlan:
        """Decide one task: its inputs (named with ``context``, theirs from now on),
        the conversation it continues (cleared first with ``new``; none without
        ``follow_ups``), and where its code runs (isolated with ``isolated``,
        ``config.executor == "isolated"`` or a ``config.workdir``: a working folder is
        walled only behind the process wall, and moving the kernel's own current folder
        would move the user's).  A task with no input (and no tools, no working folder)
        gets a :attr:`TaskPlan.notice`, which the task cell shows on stdout once the run
        has started, before any model call (a caution: stderr is red in JupyterLab; a
        start that fails, on a missing key say, shows only its error).  ``restore``
        (a continuation of a task without data: what its earlier steps made, removed when
        it ended, :attr:`set_aside`) is put back first, as model-made names of the run.

        Raises:
            UsageError: a named variable is missing; the working folder or the worker
                cannot be used."""
        from .shell_executor import numbers_steps

        ns = self.shell.user_ns
        restore = {n: v for n, v in (restore or {}).items() if n not in ns}
        ns.update(restore)
        self.made.note(restore, ns)
        self.made.adopt(context or ())  # named by the user: theirs from now on
        variables = self.inputs(context)
        if new:
            self.conversation.clear()
        history = self.conversation.before(key) if follow_ups else None
        isolated = isolated or config.executor == "isolated" or bool(config.workdir)
        counted = numbers_steps(self.shell)  # steps' counts where the task cell keeps its own
        executor = self._executor(config, isolated, counted)
        notice = (no_data_notice(ns, self.made.names(ns))
                  if not variables and not has_tools and not config.workdir
                  and not config.mcp_servers else None)
        return TaskPlan(key, variables, list(variables), history, executor, isolated,
                        list(results or ()), notice, restored=list(restore))

    def clients(self, config: RLMConfig) -> dict[str, Any]:
        """The engine's ``root_client`` / ``sub_client`` from :attr:`client_factory`
        (one client when both roles have the same model, as the engine does; none
        without a factory: the engine builds its own)."""
        if self.client_factory is None:
            return {}
        model, sub_model = config.models()
        root = self.client_factory(model)
        sub = root if sub_model == model else self.client_factory(sub_model)
        return {"root_client": root, "sub_client": sub}

    # -- a task -------------------------------------------------------------------------
    @contextmanager
    def task(self, plan: TaskPlan) -> Iterator[None]:
        """The task's lifetime: :attr:`running` from the start of the block; at its
        end, whatever way it ends, the session's helpers are bound again, an isolated
        task's ``results`` are copied back and its worker closed, and the variables
        model code made are noted (:attr:`made`).  A worker that failed (and could not
        be started again) has nothing to copy back: that is said on stderr, and the
        task's result is kept.

        A task without data of the user's (:attr:`TaskPlan.no_data`) leaves the
        namespace as it found it: the names its code added (a ``context`` it made up,
        its helpers and imports) are removed and the cell says which
        (:func:`added_names`).  Names that were there before the run are never removed,
        nor an isolated task's ``results``; a run with data keeps what its code made
        (the REPL's working state, for the user and for later tasks)."""
        ns = self.shell.user_ns
        before = self.made.snapshot(ns)
        names_before = set(ns) - set(plan.restored)
        self.running = True
        try:
            yield
        finally:
            self.running = False
            bind_session_functions(self.shell, self._sub_model(),  # builtins only
                                   router=self._router())
            if plan.isolated:
                from ..executors import WorkerError
                from .isolated_steps import copy_back

                missing: list[str] = []
                try:
                    steps = cast("IsolatedSteps", plan.executor)  # an isolated plan's
                    missing = copy_back(steps, plan.results, ns)
                except WorkerError as exc:  # its names went with the worker
                    print(f"RLM: --results: nothing copied back: {exc}", file=sys.stderr)
                finally:
                    plan.executor.close()
                if missing:
                    print(f"RLM: --results: the task left no {', '.join(missing)}",
                          file=sys.stderr)
            if plan.no_data:  # made up without the user's data: not left as if theirs
                self._remove_added(names_before, plan)
            # what model code made (also of a failed or interrupted run) is not the user's
            self.made.note_run(before, ns, inputs=plan.protected)

    def _remove_added(self, names_before: set[str], plan: TaskPlan) -> None:
        """Remove the names a task without data added to the namespace (not its
        ``results``) and say which on stdout."""
        ns = self.shell.user_ns
        added = [n for n in added_names(names_before, ns) if n not in plan.results]
        plan.removed = {name: ns.pop(name) for name in added if name in ns}
        if added:
            log.debug("removed the names of a task without data: %s", ", ".join(added))
            print(f"RLM: this task had no data of yours, so the names its code made were "
                  f"removed: {', '.join(added)}.", flush=True)

    def run(self, rlm: RLM, question: str, plan: TaskPlan, **kwargs: Any) -> RLMResult:
        """Run ``question`` with the engine's ``rlm`` on the plan's executor, inputs,
        protected names and conversation, the namespace lent for the run only
        (:func:`lent_namespace`); ``kwargs`` go to ``RLM.run``.  Returns its result
        (once the run has begun, an executor's failure is in it, never raised).

        Raises:
            UsageError: an isolated task's worker could not take its inputs (one too
                large for its memory limit, a worker that died and could not start
                again); the message says why and what to set."""
        from ..executors import WorkerError

        with lent_namespace(self.shell):  # the REPL's names for the run only
            try:
                return rlm.run(question, executor=plan.executor, variables=plan.variables,
                               history=plan.history, protected=plan.protected, **kwargs)
            except WorkerError as exc:  # before the run: binding the task's inputs
                raise UsageError(f"%rlm --isolated: {exc}") from None

    def record(self, result: RLMResult, plan: TaskPlan, run_id: str) -> None:
        """Add the finished task to the conversation (a later task is told it).  The
        variables a task without data made and left are no longer left
        (:attr:`TaskPlan.removed`): the result says so, and a later task is not told
        them."""
        if plan.removed and getattr(result, "new_variables", None):
            result.new_variables = [v for v in result.new_variables
                                    if v.name not in plan.removed]
        self.conversation.record(result, self.shell.user_ns, key=plan.key, run_id=run_id)

    # -- helpers ------------------------------------------------------------------------
    def _sub_model(self) -> str | None:
        """The session's sub-model (of the ``c.RLM`` settings, when the magic holds
        them)."""
        settings = self.settings
        return settings.run_config().models()[1] if settings is not None else None

    def _router(self) -> Any:
        """The session's model fleet (``c.RLM.router``), or None."""
        settings = self.settings
        return settings.run_config().router if settings is not None else None

    def _executor(self, config: RLMConfig, isolated: bool, counted: bool,
                  ) -> NotebookExecutor:
        """Where one task's code runs, chosen by
        :func:`~rlm_kernel.executors.executor_for`: a sandboxed worker with ``isolated``
        (:class:`~rlm_kernel.jupyter.isolated_steps.IsolatedSteps`, closed when the task
        ends), writing only in ``config.workdir`` when one is given, within
        ``config.memory_limit`` bytes, with the variables ``config.pass_env`` names; else
        the kernel's shell on the live namespace
        (:class:`~rlm_kernel.jupyter.shell_executor.ShellExecutor`).  ``counted``: the
        steps take the shell's execution counts (:func:`numbers_steps`).

        Raises:
            UsageError: the folder does not exist, or the child could not start (the
                message says why)."""
        from ..executors import WorkerError, executor_for
        from .shell_executor import ShellExecutor

        def sandboxed(**options: Any) -> Any:  # the worker's modules load when one starts
            from .isolated_steps import IsolatedSteps

            steps = IsolatedSteps(**options)
            steps.take_counts = counted
            return steps

        workdir = config.workdir
        if isolated and workdir and not os.path.isdir(workdir):
            raise UsageError(f"%rlm --workdir: {workdir!r} is not a folder")
        try:  # the two makers given make notebook executors (IsolatedSteps, ShellExecutor)
            return cast("NotebookExecutor", executor_for(
                "isolated" if isolated else "in-process", workdir=workdir or None,
                isolated_options=config.isolated_options(), isolated=sandboxed,
                in_process=lambda: ShellExecutor(self.shell, store_history=counted)))
        except ValueError as exc:  # a folder the wall refuses (the root, ...)
            raise UsageError(f"%rlm --workdir: {exc}") from None
        except WorkerError as exc:
            raise UsageError(f"%rlm --isolated: {exc}") from None


def assigned_names(source: str) -> set[str]:
    """The module-level names a cell's Python source binds or deletes (assignments,
    ``for``/``with`` targets, ``del``, ``import``, ``def``, ``class``, walrus); empty
    when it is not Python (a prose task, a magic line IPython has not transformed)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


_MACHINERY_NAMES = re.compile(r"_(i{0,3}|\d+|i\d+|oh|ih|dh|exit_code)|_{2,3}|__\w+__")
"""Names the machinery puts in the namespace: IPython's output and input history (``_``,
``__``, ``_5``, ``_i5``, ``_ii`` ...), ``_exit_code``, and dunder names (the executed-reads
record's ``__rlm_read__``, ``__builtins__``)."""


def added_names(names_before: Iterable[str], namespace: Mapping[str, Any]) -> list[str]:
    """The names of ``namespace`` that were not among ``names_before``, in the order they
    were added, but the machinery's (IPython's history entries a step's cell made, dunder
    names) and the session's (``rlm_answer`` ...): what a run's code defined, assigned or
    imported.

    Args:
        names_before: the namespace's names before the run.
        namespace: the namespace after it.
    """
    before = set(names_before)
    return [n for n in namespace if n not in before and n not in SESSION_NAMES
            and n not in RUN_NAMES and not _MACHINERY_NAMES.fullmatch(n)]


def no_data_notice(namespace: Mapping[str, Any], made: Iterable[str]) -> str:
    """What a task cell says before any model call when the task has no input variable:
    which variables the namespace holds (those model code made marked so) and how to
    give the task one.

    Args:
        namespace: the notebook's namespace.
        made: the names model code made (:meth:`ModelVariables.names`).
    """
    made = set(made)
    data = user_variables(namespace)
    shown = [f"{n} (made by an earlier task's code)" if n in made else n for n in data]
    example = next((n for n in data if n not in made), next(iter(data), "df"))
    held = (f"The namespace holds {', '.join(shown[:12])}"
            f"{f' and {len(shown) - 12} more' if len(shown) > 12 else ''}." if shown
            else "The namespace holds no data variable.")
    return (f"RLM: this task has no data of yours. {held} Load data in a cell first "
            "(context = open('notes.txt').read()) or name the variable to use: "
            f"%%rlm --context {example}. The task runs on without data: its answer will "
            "not come from your data.")


def _session_functions(shell: Any) -> dict[str, Any]:
    """The session helpers registered as the shell's builtins, by name."""
    trap = getattr(shell, "builtin_trap", None)
    auto = getattr(trap, "auto_builtins", {}) if trap is not None else {}
    return {n: auto[n] for n in RESERVED_NAMES if n in auto}


def _hide_session_builtins(shell: Any) -> dict[str, Any]:
    """Take the session helpers out of :mod:`builtins` (where the builtin trap put
    them for this cell); returns what was taken, to put back."""
    hidden = {}
    for name, fn in _session_functions(shell).items():
        if builtins.__dict__.get(name) is fn:
            hidden[name] = builtins.__dict__.pop(name)
    return hidden


def bind_session_functions(shell: Any, sub_model: str | None,
                       recorded: list[dict[str, Any]] | None = None,
                       router: Any = None) -> None:
    """Make ``llm_query`` & co. available outside runs (re-running an exported
    notebook) as the shell's builtins: the user's own names shadow them, and the
    namespace (``user_ns``) is not touched.

    Args:
        shell: the IPython shell that gets the functions.
        sub_model: litellm model string of ``llm_query`` (None: the embedded model),
            or a model_name of the ``router`` fleet.
        recorded: a run's recorded exchanges to answer from first (``%%rlm recorded``).
        router: the session's model fleet (``c.RLM.router``), or None.

    Raises:
        LLMError: the fleet cannot be read or has no model_name ``sub_model``.
    """
    from ..engine.frontends import session_functions

    repl_functions = session_functions(sub_model, shell.user_ns, recorded=recorded,
                                       router=router)
    functions = repl_functions.functions()
    # re-running a record (an exported notebook): its last step printed nothing live,
    # the answer cell below it says the answer, so FINAL only keeps it
    show = recorded is None

    def final(answer: Any) -> None:
        """Outside a run: keep the answer in ``rlm_answer`` (and show it, unless a
        record is re-running)."""
        _show_final(shell, {"type": "direct", "answer": answer}, show=show)

    def final_var(variable_name: str) -> None:
        """Outside a run: keep the named variable as the answer (and show it, unless a
        record is re-running)."""
        _show_final(shell, {"type": "variable", "var": variable_name}, show=show)

    functions.update(FINAL=final, FINAL_VAR=final_var)
    functions.update(repl_functions.tool_groups())  # a record's MCP calls: answered from it
    trap = shell.builtin_trap
    trap.auto_builtins.update(functions)  # every cell from the next one
    if getattr(trap, "_nested_level", 0) > 0:  # and the rest of this one
        for name, fn in functions.items():
            if name in getattr(trap, "_orig_builtins", {}):
                builtins.__dict__[name] = fn  # its original is recorded already
            else:
                trap.add_builtin(name, fn)


def _show_final(shell: Any, out: dict[str, Any], *, show: bool = True) -> None:
    from IPython.display import display

    try:
        answer = (resolve_final_var(out["var"], shell.user_ns) if out.get("type") == "variable"
                  else out.get("answer"))
    except KeyError as exc:
        print(f"FINAL_VAR: {exc.args[0]}", file=sys.stderr)
        return
    shell.user_ns["rlm_answer"] = answer
    if show:
        display({"text/plain": f"Final answer: {answer_text(answer)}"}, raw=True)


def final_outside_run(shell, etype, value, tb, tb_offset=None):
    """A ``FinalOutput`` raised outside a run (e.g. ``termination.FINAL`` imported
    directly): show the answer instead of a traceback."""
    _show_final(shell, value.output)
    return None


_RLM_LINE = re.compile(r"^(\s*)%rlm\s(.*\?)\s*$")


def protect_question_mark(lines: list[str]) -> list[str]:
    """Input transformer: ``%rlm Which file ...?`` stays a task.

    IPython reads a line ending in ``word?`` as a help request for ``word``;
    this runs before that rule and turns such ``%rlm`` lines into a call of
    the magic with the whole text.
    """
    out = []
    for line in lines:
        match = _RLM_LINE.match(line)
        if match:
            line = f"{match.group(1)}get_ipython().run_line_magic('rlm', {match.group(2)!r})\n"
        out.append(line)
    return out
