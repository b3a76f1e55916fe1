"""The ``%rlm`` / ``%%rlm`` magic: RLM tasks in the live IPython namespace.

    %load_ext rlm_kernel
    %rlm [options] [--] question       one line; the question is taken as typed
    %%rlm [options]                    the cell body is the task, taken as typed
    %rlm vars [--context NAME ...]     the variables the model would see
    %rlm export PATH.ipynb [--run ID]  one run as a notebook
    %rlm export PATH.jsonl --format rlm  one run as alexzhang13/rlm's log (its visualizer)
    %rlm replay [PATH] [--run ID]      a recorded run again, without the model
    %rlm tools [add|remove NAME ...]   the notebook's functions offered to the model

Options: ``--model``, ``--sub-model``, every per-run limit of ``rlm run``
(``--max-iterations``, ``--max-llm-calls``, ``--step-timeout`` ...: the same flags,
from :func:`rlm_kernel.engine.config.settings`), ``--context NAME`` (repeatable:
the variables the model is told about; default every data variable), ``--returns
TYPE`` (the answer's type: ``int``, ``list[str]``, a class of the notebook, a JSON
Schema file; :mod:`rlm_kernel.engine.answer.types`), ``--new`` (start a new
conversation: the task is not told the earlier ones) and ``--isolated`` (model code
runs in a child process behind OS limits, the variables copied in, the answer and the
``--results NAME`` copied back: :mod:`rlm_kernel.jupyter.isolated_steps`; ``--workdir
DIR`` gives model code a working folder and its file helpers, and implies it).

A task continues the session's conversation (:mod:`rlm_kernel.engine.session.conversation`):
the model is told the earlier tasks, their answers and the variables they left (their
code too with ``--history-code``).
Re-running a task cell replaces that task.  Only what the user loaded (or named with
``--context``) is the task's input, protected and shown to the model as the user's
data; variables model code made (:class:`~rlm_kernel.jupyter.session.ModelVariables`)
are working state, also after ``--new`` and when a task cell runs again.  A task with
no input says so in its cell before any model call.  Settings are
traitlets under ``c.RLM`` (``%config RLM.max_llm_calls = 20``; ``None`` = no limit),
the models among them (falling back to ``RLM_MODEL`` / ``RLM_SUB_MODEL``:
:meth:`~rlm_kernel.engine.config.RLMConfig.models`).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import uuid
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from ..engine import Conversation, add_setting_options, config_overrides, positive_int
from .frontend import FrontendRegistry, StepRenderer
from .isolated_steps import copy_back
from .run_commands import RunCommands, RunRecord
from .session import ModelVariables, bind_session_tools, lent_namespace, no_data_notice
from .settings import RLMSettings

__all__ = ["RLMMagics", "RunRecord"]


_USAGE = ("usage: %rlm [--model M] [--sub-model M] [--max-iterations N] [--max-llm-calls N] "
          "[...any rlm run limit] [--context NAME ...] [--returns TYPE] [--new] "
          "[--isolated [--results NAME ...]] [--] "
          "QUESTION  |  %rlm vars  |  %rlm export PATH.ipynb [--run ID]  |  "
          "%rlm replay [PATH] [--run ID]  |  %rlm tools [add|remove NAME ...]  |  %rlm --help")

HELP = """%rlm [options] [--] QUESTION     a task on one line, taken as typed
%%rlm [options]                    the cell body is the task
%rlm vars [--context NAME ...]     the variables the model would see
%rlm export PATH.ipynb [--run ID]  one run as a notebook (PATH.jsonl --format rlm: rlm's log)
%rlm replay [PATH] [--run ID]      a recorded run again, without the model
%rlm continue --from STEP          a run again from one of its steps
%rlm tools [add|remove NAME ...]   the notebook's functions offered to the model

Options: --model M, --sub-model M, every limit of `rlm run` (--max-iterations N,
--max-llm-calls N, --step-timeout S ...), --context NAME (repeatable: the task's data;
default every data variable), --returns TYPE, --new (a new conversation), --isolated
[--results NAME ...] (model code in a sandboxed process), --workdir DIR, --candidates N.

Models: --model M / --sub-model M for one task; %config RLM.model = "openai/gpt-4.1-mini"
(and RLM.sub_model) for the session; $RLM_MODEL / $RLM_SUB_MODEL when unset.
Back to the embedded local model: %config RLM.model = None (and %config RLM.sub_model =
None): the embedded model unless $RLM_MODEL names another; %config RLM.model = "local"
always; --model local for one task.
Settings: %config RLM lists every option with its help and current value;
%config RLM.max_llm_calls = 20 sets one (None = no limit)."""
"""``%rlm --help``: the forms, the options, and how to choose a model (and go back to
the embedded one)."""

COMMANDS = ("vars", "export", "replay", "continue", "recorded", "tools")
"""First words that make a ``%rlm`` line a sub-command, not a question (``%rlm -- vars
...`` asks a question that starts with one of them)."""

# White space, then one shell-like word (group 1): unquoted characters, backslash
# escapes, '...' or "..." runs.
_WORD = re.compile(r"""\s*((?:[^\s'"\\]+|\\.?|'[^']*'?|"(?:[^"\\]|\\.)*"?)+)""")


class _Parser(argparse.ArgumentParser):
    """argparse whose errors are a :class:`UsageError` with the magic's usage line
    (never ``SystemExit``)."""

    def error(self, message: str) -> Any:  # argparse: "should not return"
        raise UsageError(f"%rlm: {message}\n{_USAGE}")


def _parser(prog: str) -> argparse.ArgumentParser:
    """The magic's line options: the models, the per-run settings ``rlm run`` has
    (from :func:`~rlm_kernel.engine.config.settings`), ``--context`` and ``--run``."""
    parser = _Parser(prog=prog, add_help=False, exit_on_error=False, allow_abbrev=False)
    add_setting_options(parser, with_help=False)
    parser.add_argument("--context", action="append")
    parser.add_argument("--returns")
    parser.add_argument("--new", action="store_true")
    parser.add_argument("--isolated", action="store_true")
    parser.add_argument("--results", action="append")
    parser.add_argument("--run")
    parser.add_argument("--format", choices=["notebook", "rlm"])
    parser.add_argument("--from", dest="from_step", type=positive_int)
    parser.add_argument("words", nargs="*")
    return parser


def parse_line(line: str) -> tuple[argparse.Namespace, str]:
    """Split a ``%rlm`` line into its options and the question, taken verbatim.

    Options are read from the start of the line, as a shell would (quotes and
    backslashes in their values), up to the first word that is not an option or an
    explicit ``--``; the rest of the line, stripped of surrounding white space, is the
    question exactly as typed: apostrophes, quotes, backslashes, ``--`` inside the text,
    unicode.  When the rest starts with a sub-command (:data:`COMMANDS`, and no ``--``
    came before it), the rest is split as shell words and parsed too: its words land in
    ``words``, the returned question is ``""``.

    Args:
        line: the text after ``%rlm`` / ``%%rlm`` (no variable expansion).

    Returns:
        ``(options, question)``: the argparse namespace (settings, ``model``,
        ``context`` ..., ``words``) and the question (``""`` for none).

    Raises:
        UsageError: an unknown option, a missing or malformed value, unbalanced quotes
            in an option's value; the message ends with the usage line.
    """
    parser = _parser("%rlm")
    # flag -> whether it takes a value (argparse lists its actions in no public API)
    takes_value = {flag: action.nargs != 0 for action in parser._actions
                   for flag in action.option_strings}
    argv: list[str] = []
    pos, rest, explicit = 0, "", False
    while True:
        match = _WORD.match(line, pos)
        if match is None or not match.group(1).startswith("--"):
            rest = line[match.start(1):] if match else ""
            break
        word, pos = _unquote(match.group(1)), match.end()
        if word == "--":
            explicit, rest = True, line[pos:]
            if rest[:1].isspace():  # the one space after "--" separates, the rest is kept
                rest = rest[1:]
            break
        argv.append(word)
        flag = word.split("=", 1)[0]
        if flag not in takes_value:
            raise UsageError(f"%rlm: unknown option {flag} (a question that starts with "
                             f"--: %rlm -- {flag} ...)\n{_USAGE}")
        if "=" in word or not takes_value[flag]:
            continue
        value = _WORD.match(line, pos)
        if value is None:
            raise UsageError(f"%rlm: {flag} expects a value\n{_USAGE}")
        argv.append(_unquote(value.group(1)))
        pos = value.end()
    first = rest.split(None, 1)[:1]
    if not explicit and first and first[0] in COMMANDS:
        try:
            argv += shlex.split(rest)
        except ValueError as exc:
            raise UsageError(f"%rlm: {exc}\n{_USAGE}") from None
        rest = ""
    try:
        opts = parser.parse_args(argv)
    except argparse.ArgumentError as exc:
        raise UsageError(f"%rlm: {exc}\n{_USAGE}") from None
    return opts, rest.strip()


def _unquote(word: str) -> str:
    """One shell word without its quotes and escapes.

    Raises:
        UsageError: unbalanced quotes or a trailing backslash.
    """
    try:
        parts = shlex.split(word)
    except ValueError as exc:
        raise UsageError(f"%rlm: {exc} in {word}\n{_USAGE}") from None
    return parts[0] if parts else ""


@magics_class
class RLMMagics(Magics, RLMSettings, RunCommands):
    """``%rlm`` / ``%%rlm``.  Settings come from the ``RLM`` config section: every run
    setting of :class:`~rlm_kernel.engine.config.RLMConfig`, the models and the
    widgets switch, all inherited from :class:`~rlm_kernel.jupyter.settings.RLMSettings`."""

    @classmethod
    def section_names(cls) -> list[str]:
        """Config section: ``c.RLM`` (and ``c.RLMMagics``)."""
        return ["RLM", cls.__name__]

    def __init__(self, shell: Any = None, **kwargs: Any) -> None:
        super().__init__(shell=shell, **kwargs)
        self.runs: dict[str, RunRecord] = {}
        self.step_counts: set[int] = set()
        self._views: dict[str, Any] = {}  # task cell id -> its last run's widgets
        self.cell_log: list[str] = []  # the user's cells, for an export's setup cells
        self.conversation = Conversation()
        """The session's earlier tasks (:mod:`rlm_kernel.engine.session.conversation`)."""
        self.made = ModelVariables()
        """The variables model code made: never the user's data nor protected inputs
        (kept across ``--new``)."""
        self.running: bool = False
        """True while a run goes (from before its widgets appear until it has ended):
        :class:`~rlm_kernel.jupyter.kernel.RLMKernel` reads it to keep the frontend's
        status busy, and the user's cell log skips the steps' cells."""
        if shell is not None:
            shell.events.register("pre_run_cell", self._log_cell)
        self.registry = FrontendRegistry()
        kernel = getattr(shell, "kernel", None)
        if kernel is not None:
            self.registry.register(kernel)

    # -- the magic ----------------------------------------------------------------------
    @no_var_expand
    @line_cell_magic
    def rlm(self, line: str, cell: str | None = None) -> Any:
        """Run an RLM task (see the module docstring for the forms).

        The question is taken as typed (:func:`parse_line`): no ``$name`` or ``{expr}``
        expansion, no shell quoting.  A sub-command's line is expanded as IPython
        expands other magics' lines (``%rlm export $path``).  In ``%%rlm`` the first
        line takes options; words after them start the task, which goes on in the cell
        body."""
        if cell is None and line.strip() in ("--help", "-h"):
            print(HELP)
            return None
        opts, question = parse_line(line)
        if opts.words and self.shell is not None:  # a sub-command's paths and names expand
            opts, question = parse_line(self.shell.var_expand(line))
        if opts.words:
            try:
                return self._command(opts, cell)
            except UsageError as exc:
                raise UsageError(f"{exc}\n(a question that starts with {opts.words[0]!r}: "
                                 f"%rlm -- {opts.words[0]} ...)") from None
        if cell is not None:
            question = "\n".join(part for part in (question, cell.strip()) if part)
        if not question:
            raise UsageError("%rlm: no task given (write it after %rlm, or below %%rlm)\n"
                             + _USAGE)
        return self.run_task(question, opts)

    def _command(self, opts: argparse.Namespace, cell: str | None) -> Any:
        """A sub-command (:data:`COMMANDS`): its name and arguments are ``opts.words``.

        Raises:
            UsageError: the command does not exist in this form, or its arguments are
                wrong."""
        name, args = opts.words[0], opts.words[1:]
        if name == "continue":
            return self._continue(opts, cell)
        if cell is not None and name == "recorded":
            return self._use_recorded(cell)
        if cell is None and name == "vars":
            return self._show_vars(opts.context)
        if cell is None and name == "export":
            return self._export(args, opts.run, opts.format, cell_id=_cell_id(self.shell))
        if cell is None and name == "replay":
            return self._replay(args, opts)
        if cell is None and name == "tools":
            return self._tools_command(args)
        raise UsageError(f"%rlm {name}: not available "
                         f"{'in %%rlm' if cell is not None else 'as a line magic'}\n{_USAGE}")

    def run_task(self, question: str, opts: argparse.Namespace, replay: Any = None,
                 continuation: Any = None, continues: str | None = None) -> Any:
        """Run one task in the shell's namespace; returns the answer value (or None).
        With ``replay`` (a :class:`~rlm_kernel.engine.replay.recording.Recording`) the
        recorded replies answer instead of any model; with ``continuation`` (an
        :class:`~rlm_kernel.engine.replay.resume.Continuation` of run ``continues``) the run
        goes on from one of that run's steps.

        The task continues the session's conversation (:attr:`conversation`; not with
        ``--new`` or ``c.RLM.follow_ups = False``), offers the tools of
        :attr:`tools` (``%rlm tools``), and asks for the ``--returns`` type.  Only
        the variables the user loaded or named are its inputs (protected, and shown to
        the model as the user's data); the ones model code made (:attr:`made`) are not.
        With no input, the cell says so (and what the namespace holds) before any model
        call, and the task runs on.

        Raises:
            UsageError: a ``--context`` name is not in the namespace, an option value
                is out of bounds, the ``--returns`` type or a tool is not usable.
        """
        from ..engine import RLM
        from ..models import LLMError
        from .shell_executor import ShellExecutor

        ns = self.shell.user_ns
        self.made.adopt(opts.context or ())  # named by the user: theirs from now on
        variables = self._variables(opts.context)
        try:
            config = self.run_config(**config_overrides(opts))
        except ValueError as exc:
            raise UsageError(f"%rlm: {exc}\n{_USAGE}") from None
        run_id, cell_id = uuid.uuid4().hex[:8], _cell_id(self.shell)
        answer_type = self._answer_type(getattr(opts, "returns", None))
        tools = self._tool_functions()
        if getattr(opts, "new", False):
            self.conversation.clear()
        history = self.conversation.before(cell_id) if self.follow_ups else None
        protected = list(variables)
        setup = self._setup_cells() + _earlier_cells(history)
        # a working folder is walled only behind the process wall (and moving the
        # kernel's own current folder would move the user's)
        isolated = bool(getattr(opts, "isolated", False)) or config.executor == "isolated" \
            or bool(config.workdir)
        results = [n for item in getattr(opts, "results", None) or [] for n in
                   item.replace(",", " ").split()]
        if results and not isolated:
            raise UsageError("%rlm: --results copies names out of an --isolated task's "
                             f"REPL; without --isolated they are in the notebook already\n{_USAGE}")
        executor = self._isolated_executor(config.workdir, config.memory_limit) if isolated \
            else ShellExecutor(self.shell)
        if not variables and not tools and not config.workdir:  # before any model call
            # a caution, not an error: stdout (stderr is red in JupyterLab)
            print(no_data_notice(ns, self.made.names(ns)), flush=True)
        before = self.made.snapshot(ns)
        # Running from before the widgets appear: the subshell request they make the
        # frontend send must not turn its status to idle (RLMKernel._publish_status).
        self.running = True
        try:
            renderer = self._renderer(run_id, cell_id, executor)
            if continuation is not None:
                renderer.continues = {"run_id": continues,
                                      "from_step": continuation.from_step}
            view = self._view(cell_id, config.max_iterations, [*variables, *tools])
        except BaseException:
            self.running = False
            if isolated:
                executor.close()
            raise

        def observer(event: Any) -> None:
            renderer(event)
            if view is not None:
                view.on_event(event)

        try:
            rlm = RLM(config=config, observer=observer, replay=replay, tools=tools)
            with lent_namespace(self.shell):  # the REPL's names for the run only
                result = rlm.run(question, executor=executor, variables=variables,
                                 continuation=continuation, output_type=answer_type,
                                 history=history, protected=protected)
        except LLMError as exc:
            print(f"RLM: {exc}", file=sys.stderr)
            return None
        finally:
            self.running = False
            bind_session_tools(self.shell, self.run_config().models()[1])  # builtins only
            if view is not None:
                view.close()
            if isolated:
                try:
                    missing = copy_back(executor, results, self.shell.user_ns)
                finally:
                    executor.close()
                if missing:
                    print(f"RLM: --results: the task left no {', '.join(missing)}",
                          file=sys.stderr)
            # what model code made (also of a failed or interrupted run) is not the user's
            self.made.note_run(before, ns, inputs=protected)
        self.conversation.record(result, self.shell.user_ns, key=cell_id or run_id,
                                 run_id=run_id)
        return self._finish(RunRecord(run_id, result, cell_id, setup, renderer.step_outputs,
                                      renderer.execution_counts, renderer.messages))

    def _renderer(self, run_id: str, cell_id: str | None, executor: Any) -> StepRenderer:
        """The run's step renderer: comm messages to a frontend extension, else inline
        display updates in the task cell."""
        pub = self.shell.display_pub

        def publish(data: dict, md: dict, display_id: str, update: bool) -> None:
            pub.publish(data=data, metadata=md, transient={"display_id": display_id},
                        update=update)

        renderer = StepRenderer(run_id, cell_id, publish, use_comm=self.registry.present,
                                executor=executor)
        executor.on_rich_output = renderer.on_rich_output
        return renderer

    def _view(self, cell_id: str | None, max_iterations: int, names: list[str]) -> Any:
        """Display the run's progress and variables widgets (None if ``widgets`` is
        off); a re-run cell's previous widgets are closed first.  Each widget has a
        display id: when the run ends, ``view.close()`` turns both displays into
        static HTML and text (:meth:`~rlm_kernel.jupyter.widgets.RunView.close`)."""
        if not self.widgets:
            return None
        from .widgets import RunView

        view = RunView(max_iterations, namespace=self.shell.user_ns, names=names)
        old = self._views.pop(cell_id, None) if cell_id else None
        if old is not None:
            old.dispose()
        if cell_id:
            self._views[cell_id] = view
        view.show()
        return view

    def _finish(self, record: RunRecord) -> Any:
        """Keep the run for ``%rlm export``, bind ``rlm_answer``, report a run that
        did not end with FINAL; returns the answer value."""
        result = record.result
        self.step_counts.update(c for c in record.execution_counts if c is not None)
        self.runs[record.run_id] = record
        value = result.answer_value if result.answer is not None else None
        ns = self.shell.user_ns
        ns["rlm_answer"] = value
        ns.setdefault("rlm_answers", []).append(value)
        if result.diverged_at is not None:
            print(f"RLM replay of run {record.run_id}: step {result.diverged_at} printed "
                  "other output than the record (diverged_at)", file=sys.stderr)
        if result.stopped_by != "final":
            error = (result.error or "").removeprefix(f"{result.stopped_by}: ")
            reason = f": {error}" if error else ""  # not "stuck: stuck: step 4 ..."
            kept = f"{result.steps} step{'' if result.steps == 1 else 's'} kept"
            # stderr (red in JupyterLab) only for an error; a limit, an interrupt or a
            # stuck run is said plainly (the progress view shows it in amber)
            print(f"RLM run {record.run_id} stopped by {result.stopped_by}{reason} "
                  f"({kept})", file=sys.stderr if result.stopped_by == "error" else sys.stdout)
        return value

    # -- helpers ------------------------------------------------------------------------
    def _isolated_executor(self, workdir: str | None, memory_limit: int | None) -> Any:
        """A sandboxed worker for one ``--isolated`` task (closed when the task ends),
        writing only in ``workdir`` when one is given, within ``memory_limit`` bytes.

        Raises:
            UsageError: the folder does not exist, or the child could not start (the
                message says why)."""
        from ..executors import WorkerError
        from .isolated_steps import IsolatedSteps

        if workdir and not os.path.isdir(workdir):
            raise UsageError(f"%rlm --workdir: {workdir!r} is not a folder")
        try:
            return IsolatedSteps(workdir=workdir or None, memory_limit=memory_limit)
        except ValueError as exc:  # a folder the wall refuses (the root, ...)
            raise UsageError(f"%rlm --workdir: {exc}") from None
        except WorkerError as exc:
            raise UsageError(f"%rlm --isolated: {exc}") from None

    def _variables(self, names: list[str] | None) -> dict[str, Any]:
        """The task's inputs: the variables named (``--context``), else every data
        variable of the namespace but those model code made (:attr:`made`).

        Raises:
            UsageError: a named variable is not in the namespace."""
        from ..engine import user_variables

        ns = self.shell.user_ns
        missing = [n for n in names or () if n not in ns]
        if missing:
            raise UsageError(f"%rlm: no variable named {', '.join(missing)}")
        if names:
            return user_variables(ns, names)
        made = self.made.names(ns)
        return {n: v for n, v in user_variables(ns).items() if n not in made}

    def _answer_type(self, text: str | None) -> Any:
        """The ``--returns`` type (names resolve in the notebook's namespace first).

        Raises:
            UsageError: the type cannot be read or checked."""
        if not text:
            return None
        from ..engine import parse_type

        try:
            return parse_type(text, self.shell.user_ns)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"%rlm --returns: {exc}") from None

    def _tool_functions(self) -> dict[str, Any]:
        """The functions named in :attr:`tools`, from the namespace.

        Raises:
            UsageError: a name is missing from the namespace, not callable, or
                reserved."""
        from ..engine import check_tools

        ns = self.shell.user_ns
        missing = [n for n in self.tools if n not in ns]
        if missing:
            raise UsageError(f"%rlm: the tool {', '.join(missing)} is not defined "
                             "(%rlm tools remove NAME drops it)")
        try:
            return check_tools({n: ns[n] for n in self.tools})
        except (TypeError, ValueError) as exc:
            raise UsageError(f"%rlm: {exc}") from None

    def _tools_command(self, args: list[str]) -> Any:
        """``%rlm tools`` (list), ``%rlm tools add NAME ...``, ``%rlm tools remove
        NAME ...``: the notebook's functions offered to the model (``c.RLM.tools``).

        Raises:
            UsageError: another verb, no names, a name that is not a callable of the
                namespace or is reserved, removing a name that is not a tool."""
        from ..engine import check_tools, describe_tool

        verb, names = (args[0], args[1:]) if args else ("list", [])
        ns = self.shell.user_ns
        if verb == "add" and names:
            missing = [n for n in names if n not in ns]
            if missing:
                raise UsageError(f"%rlm tools add: no {', '.join(missing)} in the namespace")
            try:
                check_tools({n: ns[n] for n in names})
            except (TypeError, ValueError) as exc:
                raise UsageError(f"%rlm tools add: {exc}") from None
            self.tools = [*self.tools, *(n for n in names if n not in self.tools)]
        elif verb == "remove" and names:
            unknown = [n for n in names if n not in self.tools]
            if unknown:
                raise UsageError(f"%rlm tools remove: {', '.join(unknown)} is not a tool "
                                 f"(tools: {', '.join(self.tools) or 'none'})")
            self.tools = [n for n in self.tools if n not in names]
        elif verb != "list" or names:
            raise UsageError("usage: %rlm tools  |  %rlm tools add NAME [NAME ...]  |  "
                             "%rlm tools remove NAME [NAME ...]")
        lines = [describe_tool(n, ns[n]) if n in ns else f"- {n} (not defined)"
                 for n in self.tools]
        print("Tools offered to the model:\n" + "\n".join(lines) if lines
              else "No tools (%rlm tools add NAME offers a function of the notebook).")

    def _log_cell(self, info: Any) -> None:
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

    def _setup_cells(self) -> list[str]:
        """The cells run before this task that are neither tasks nor exports."""
        from .prose import is_prose

        cells = []
        for src in self.cell_log[:-1]:  # the last one is the task cell itself
            text = src.strip()
            if not text or text.startswith(("%rlm", "%%rlm", "%load_ext rlm_kernel")):
                continue
            if getattr(self.shell, "kernel", None) is not None and \
                    getattr(self.shell.kernel, "prose_tasks", False) and is_prose(text):
                continue
            cells.append(src)
        return cells

    def _show_vars(self, names: list[str] | None) -> Any:
        from IPython.display import display

        from .widgets import VariablesView, variables_from_namespace

        view = VariablesView()
        view.update(variables_from_namespace(self.shell.user_ns, list(self._variables(names))))
        display(view.static(), raw=True)  # a snapshot: reads the same after the kernel
        view.widget.close()


def _earlier_cells(history: Any) -> list[str]:
    """Setup cells for an export of a follow-up task: the code of the earlier tasks'
    steps (their variables are the follow-up's working state), one cell per task."""
    cells = []
    for i, task in enumerate(history.tasks if history else (), start=1):
        if task.code:
            head = f"# earlier task {i}: {' '.join(task.question.split())[:200]}"
            cells.append("\n\n".join([head, *task.code]))
    return cells


def _cell_id(shell: Any) -> str | None:
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent() if kernel is not None else {}
    except Exception:  # noqa: BLE001 - no request context (e.g. terminal IPython)
        parent = {}
    return (parent or {}).get("metadata", {}).get("cellId")
