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
import io
import shlex
import sys
import uuid
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand

from ..engine import Conversation
from ..engine.frontends import add_setting_options, config_overrides, positive_int
from .frontend import FrontendRegistry, NotebookExecutor, StepRenderer
from .run_commands import RunCommands, RunRecord
from .session import ClientFactory, ModelVariables, NotebookSession
from .settings import RLMSettings

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from ..engine import Continuation, Event

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

class _Parser(argparse.ArgumentParser):
    """argparse whose errors are a :class:`UsageError` ending with a usage line (never
    ``SystemExit``), and which keeps which of its options take a value (so that a
    line's options can be told from the question after them)."""

    def __init__(self, *args: Any, usage_line: str = _USAGE, **kwargs: Any) -> None:
        kwargs.update(add_help=False, exit_on_error=False, allow_abbrev=False)
        super().__init__(*args, **kwargs)
        self.usage_line = usage_line
        self.takes_value: dict[str, bool] = {}
        """Option flag -> whether it takes a value."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """argparse's, noting the option's flags in :attr:`takes_value`."""
        action = super().add_argument(*args, **kwargs)
        self.takes_value.update(dict.fromkeys(action.option_strings, action.nargs != 0))
        return action

    def error(self, message: str) -> Any:  # argparse: "should not return"
        raise UsageError(f"%rlm: {message}\n{self.usage_line}")

    def parse_into(self, argv: list[str], namespace: argparse.Namespace) -> argparse.Namespace:
        """Parse ``argv`` into ``namespace`` (whose values stay where ``argv`` gives
        none).

        Raises:
            UsageError: an unknown option or argument, a missing or malformed value."""
        try:
            return self.parse_args(argv, namespace)
        except argparse.ArgumentError as exc:
            raise UsageError(f"%rlm: {exc}\n{self.usage_line}") from None


def _task_options(parser: _Parser) -> _Parser:
    """A task's options on ``parser``: the models, the per-run settings ``rlm run`` has
    (from :func:`~rlm_kernel.engine.config.settings`), ``--context``, ``--returns``,
    ``--new``, ``--isolated``, ``--results``."""
    add_setting_options(parser, with_help=False)
    parser.add_argument("--context", action="append")
    parser.add_argument("--returns")
    parser.add_argument("--new", action="store_true")
    parser.add_argument("--isolated", action="store_true")
    parser.add_argument("--results", action="append")
    return parser


def _command_parsers() -> dict[str, _Parser]:
    """The ``%rlm`` sub-commands' grammar: one parser per sub-command (argparse
    sub-parsers), by name.  ``replay`` and ``continue`` run a task, so they take a
    task's options too."""
    top = _Parser(prog="%rlm")
    commands = top.add_subparsers(dest="command", parser_class=_Parser)

    def command(name: str, usage: str, task: bool = False) -> _Parser:
        parser = commands.add_parser(name, prog=f"%rlm {name}", usage_line=f"usage: {usage}")
        return _task_options(parser) if task else parser

    command("vars", "%rlm vars [--context NAME ...]").add_argument("--context",
                                                                   action="append")
    export = command("export", "%rlm export PATH.ipynb [--run ID]  |  "
                               "%rlm export PATH.jsonl --format rlm [--run ID]")
    export.add_argument("args", nargs=1, metavar="PATH")
    export.add_argument("--run")
    export.add_argument("--format", choices=["notebook", "rlm"])
    export.add_argument("--to-frontend", action="store_true",
                        help="send the notebook to the frontend (which saves it) instead "
                             "of writing PATH where the kernel runs")
    replay = command("replay", "%rlm replay [PATH.ipynb | PATH.json] [--run ID]", task=True)
    replay.add_argument("args", nargs="?", metavar="PATH")
    replay.add_argument("--run")
    cont = command("continue", "%rlm continue --from STEP [--run ID]  (%%rlm continue "
                               "--from STEP: the cell body is the step's new code)", task=True)
    cont.add_argument("--from", dest="from_step", type=positive_int)
    cont.add_argument("--run")
    command("recorded", "%%rlm recorded  (the cell: a JSON list of recorded exchanges)")
    command("tools", "%rlm tools  |  %rlm tools add NAME [NAME ...]  |  "
                     "%rlm tools remove NAME [NAME ...]").add_argument("args", nargs="*")
    return dict(commands.choices)


COMMANDS = ("vars", "export", "replay", "continue", "recorded", "tools")
"""First words that make a ``%rlm`` line a sub-command, not a question (``%rlm -- vars
...`` asks a question that starts with one of them)."""


def parse_line(line: str) -> tuple[argparse.Namespace, str]:
    """Split a ``%rlm`` line into its options and the question, taken verbatim.

    Options are read from the start of the line as shell words (:mod:`shlex`: quotes
    and backslashes in their values), up to the first word that is not an option or an
    explicit ``--``; the rest of the line, stripped of surrounding white space, is the
    question exactly as typed: apostrophes, quotes, backslashes, ``--`` inside the text,
    unicode.  When the rest starts with a sub-command (:data:`COMMANDS`, and no ``--``
    came before it), the rest is split as shell words and parsed by that sub-command's
    parser (:func:`_command_parsers`): ``command`` is its name, ``words`` its name and
    arguments, the returned question is ``""``.

    Args:
        line: the text after ``%rlm`` / ``%%rlm`` (no variable expansion).

    Returns:
        ``(options, question)``: the argparse namespace (settings, ``model``,
        ``context`` ..., ``command``, ``words``) and the question (``""`` for none).

    Raises:
        UsageError: an unknown option, a missing or malformed value, unbalanced quotes
            in an option's value, a sub-command's bad arguments; the message ends with
            the usage line.
    """
    parser = _task_options(_Parser(prog="%rlm"))
    stream = io.StringIO(line)
    lexer = shlex.shlex(stream, posix=True)
    lexer.whitespace_split, lexer.commenters = True, ""
    argv: list[str] = []
    pos, explicit = 0, False

    def word() -> str | None:
        nonlocal pos
        try:
            token = lexer.get_token()
        except ValueError as exc:  # unbalanced quotes, a trailing backslash
            raise UsageError(f"%rlm: {exc}\n{_USAGE}") from None
        pos = stream.tell()
        return token

    while line[pos:].lstrip().startswith("--"):
        flag = word() or ""
        if flag == "--":
            explicit = True
            break
        argv.append(flag)
        name = flag.split("=", 1)[0]
        if name not in parser.takes_value:
            raise UsageError(f"%rlm: unknown option {name} (a question that starts with "
                             f"--: %rlm -- {name} ...)\n{_USAGE}")
        if "=" in flag or not parser.takes_value[name]:
            continue
        value = word()
        if value is None:
            raise UsageError(f"%rlm: {name} expects a value\n{_USAGE}")
        argv.append(value)
    rest = line[pos:]
    opts = parser.parse_into(argv, argparse.Namespace(command=None, words=[]))
    first = rest.split(None, 1)[:1]
    if explicit or not first or first[0] not in COMMANDS:
        return opts, rest.strip()
    try:
        words = shlex.split(rest)
        opts = _command_parsers()[words[0]].parse_into(words[1:], opts)
    except ValueError as exc:
        raise UsageError(f"%rlm: {exc}\n{_USAGE}") from None
    except UsageError as exc:
        raise UsageError(f"{exc}\n(a question that starts with {words[0]!r}: "
                         f"%rlm -- {words[0]} ...)") from None
    args = getattr(opts, "args", None)
    opts.command = words[0]
    opts.words = [words[0], *([] if args is None else [args] if isinstance(args, str)
                              else args)]
    return opts, ""


@magics_class
class RLMMagics(Magics, RLMSettings, RunCommands):
    """``%rlm`` / ``%%rlm``.  Settings come from the ``RLM`` config section: every run
    setting of :class:`~rlm_kernel.engine.config.RLMConfig`, the models and the
    widgets switch, all inherited from :class:`~rlm_kernel.jupyter.settings.RLMSettings`."""

    @classmethod
    def section_names(cls) -> list[str]:
        """Config section: ``c.RLM`` (and ``c.RLMMagics``)."""
        return ["RLM", cls.__name__]

    shell: InteractiveShell  # IPython's Magics allows None; the magics run in a shell

    def __init__(self, shell: Any = None, client_factory: ClientFactory | None = None,
                 **kwargs: Any) -> None:
        """Args:
            shell: the IPython shell.
            client_factory: the session's model clients
                (:attr:`NotebookSession.client_factory`; None: the engine's litellm
                clients).
            **kwargs: traitlets (``parent``, ``config``, settings)."""
        super().__init__(shell=shell, **kwargs)
        self.runs: dict[str, RunRecord] = {}
        self.step_counts: set[int] = set()
        self._views: dict[str, Any] = {}  # task cell id -> its last run's widgets
        self.session = NotebookSession(shell, settings=self, client_factory=client_factory)
        """The session's policy: inputs, executor, conversation, teardown, clients."""
        self.registry = FrontendRegistry()
        kernel = getattr(shell, "kernel", None)
        if kernel is not None:
            self.registry.register(kernel)

    @property
    def conversation(self) -> Conversation:
        """The session's earlier tasks (:attr:`NotebookSession.conversation`)."""
        return self.session.conversation

    @property
    def made(self) -> ModelVariables:
        """The variables model code made (:attr:`NotebookSession.made`)."""
        return self.session.made

    @property
    def running(self) -> bool:
        """Whether a task runs (:attr:`NotebookSession.running`)."""
        return self.session.running

    @property
    def cell_log(self) -> list[str]:
        """The user's cells (:attr:`NotebookSession.cell_log`)."""
        return self.session.cell_log

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
        line_form, cell_form = {
            "continue": (lambda: self._continue(opts, None), lambda: self._continue(opts, cell)),
            "recorded": (None, lambda: self._use_recorded(cell or "")),  # a cell form
            "vars": (lambda: self._show_vars(opts.context), None),
            "export": (lambda: self._export(args, opts.run, opts.format,
                                            cell_id=_cell_id(self.shell),
                                            to_frontend=opts.to_frontend), None),
            "replay": (lambda: self._replay(args, opts), None),
            "tools": (lambda: self._tools_command(args), None),
        }[name]
        handler = line_form if cell is None else cell_form
        if handler is None:
            raise UsageError(f"%rlm {name}: not available "
                             f"{'in %%rlm' if cell is not None else 'as a line magic'}"
                             f"\n{_USAGE}")
        return handler()

    def run_task(self, question: str, opts: argparse.Namespace,
                 replay: Any = None, continuation: Continuation | None = None,
                 continues: str | None = None) -> Any:
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
        With no input, the cell says so (and what the namespace holds) once the run has
        started, before any model call, and the task runs on; what its code adds to the
        namespace is removed when it ends (:meth:`NotebookSession.task`).

        Raises:
            UsageError: a ``--context`` name is not in the namespace, an option value
                is out of bounds, the ``--returns`` type or a tool is not usable.
        """
        from ..engine import RLM
        from ..engine.frontends import RunStarted
        from ..models import LLMError

        try:
            config = self.run_config(**config_overrides(opts))
        except ValueError as exc:
            raise UsageError(f"%rlm: {exc}\n{_USAGE}") from None
        run_id, cell_id = uuid.uuid4().hex[:8], _cell_id(self.shell)
        answer_type = self._answer_type(getattr(opts, "returns", None))
        tools = self._tool_functions()
        isolated = bool(getattr(opts, "isolated", False))
        results = [n for item in getattr(opts, "results", None) or [] for n in
                   item.replace(",", " ").split()]
        if results and not (isolated or config.executor == "isolated" or config.workdir):
            raise UsageError("%rlm: --results copies names out of an --isolated task's "
                             f"REPL; without --isolated they are in the notebook already\n{_USAGE}")
        aside = self.session.set_aside
        plan = self.session.plan(cell_id or run_id, config, context=opts.context,
                                 new=bool(getattr(opts, "new", False)),
                                 follow_ups=self.follow_ups, isolated=isolated,
                                 results=results, has_tools=bool(tools),
                                 restore=aside[1] if aside and aside[0] == continues
                                 and continues else None)
        setup = self._setup_cells() + _earlier_cells(plan.history)
        # Running from before the widgets appear: the subshell request they make the
        # frontend send must not turn its status to idle (RLMKernel._publish_status).
        with self.session.task(plan):
            renderer = self._renderer(run_id, cell_id, plan.executor)
            if continuation is not None:
                renderer.continues = {"run_id": continues,
                                      "from_step": continuation.from_step}
            view = self._view(cell_id, config.max_iterations, [*plan.variables, *tools])
            notice = [plan.notice] if plan.notice else []

            def observer(event: Event) -> None:
                if notice and isinstance(event, RunStarted):  # started: no model call yet
                    print(notice.pop(), flush=True)
                renderer(event)
                if view is not None:
                    view.on_event(event)

            try:
                clients = {} if replay is not None else self.session.clients(config)
                rlm = RLM(config=config, observer=observer, replay=replay, tools=tools,
                          **clients)
                result = self.session.run(rlm, question, plan, continuation=continuation,
                                          output_type=answer_type)
            except LLMError as exc:
                print(f"RLM: {exc}", file=sys.stderr)
                return None
            finally:
                if view is not None:
                    view.close()
        if plan.removed:  # a continuation of this run gets them back
            self.session.set_aside = (run_id, plan.removed)
        self.session.record(result, plan, run_id)
        return self._finish(RunRecord(run_id, result, cell_id, setup, renderer.step_outputs,
                                      renderer.execution_counts, renderer.messages))

    def _renderer(self, run_id: str, cell_id: str | None, executor: NotebookExecutor,
                  ) -> StepRenderer:
        """The run's step renderer: comm messages to a frontend extension, else inline
        display updates in the task cell."""
        pub = self.shell.display_pub
        # the RLM shell's publisher gives a step's displays to the step: the run's own
        # displays go to the task cell (a stock shell's is swapped only during a step)
        out = getattr(pub, "publish_outside_step", pub.publish)

        def publish(data: dict, md: dict, display_id: str, update: bool) -> None:
            out(data=data, metadata=md, transient={"display_id": display_id}, update=update)

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
        did not end with FINAL; returns the answer value.

        A run that ends without an answer (interrupted, failed, stuck, out of budget)
        leaves ``rlm_answer`` as it was, and says so when it holds an earlier answer;
        ``rlm_answers`` gets one entry per run (None for a run without an answer)."""
        result = record.result
        self.step_counts.update(c for c in record.execution_counts if c is not None)
        self.runs[record.run_id] = record
        answered = result.answer is not None
        value = result.answer_value if answered else None
        ns = self.shell.user_ns
        kept = not answered and "rlm_answer" in ns
        if not kept:
            ns["rlm_answer"] = value
        ns.setdefault("rlm_answers", []).append(value)
        if result.diverged_at is not None:
            print(f"RLM replay of run {record.run_id}: step {result.diverged_at} printed "
                  "other output than the record (diverged_at)", file=sys.stderr)
        if result.stopped_by == "error" or (result.stopped_by != "final"
                                            and not self.registry.present):
            # an error is said on stderr (red in JupyterLab), the one readable message;
            # a limit, an interrupt or a stuck run is said once: in JupyterLab with the
            # extension by the progress view's ending (amber) and the answer cell, in
            # another frontend (one that may show no widget) by this line
            reason = f": {result.error}" if result.error else ""
            steps = f"{result.steps} step{'' if result.steps == 1 else 's'} kept"
            print(f"RLM run {record.run_id} stopped by {result.stopped_by}{reason} "
                  f"({steps})", file=sys.stderr if result.stopped_by == "error" else sys.stdout)
        if kept and ns["rlm_answer"] is not None:
            print("rlm_answer still holds the previous answer.")
        return value

    # -- helpers ------------------------------------------------------------------------
    def _answer_type(self, text: str | None) -> Any:
        """The ``--returns`` type (names resolve in the notebook's namespace first).

        Raises:
            UsageError: the type cannot be read or checked."""
        if not text:
            return None
        from ..engine.frontends import parse_type

        try:
            return parse_type(text, self.shell.user_ns)
        except (ValueError, TypeError) as exc:
            raise UsageError(f"%rlm --returns: {exc}") from None

    def _tool_functions(self) -> dict[str, Any]:
        """The functions named in :attr:`tools`, from the namespace.

        Raises:
            UsageError: a name is missing from the namespace, not callable, or
                reserved."""
        from ..engine.frontends import check_tools

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
        from ..engine.frontends import check_tools, describe_tool

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

    def _setup_cells(self) -> list[str]:
        """The cells run before this task that are neither tasks nor exports."""
        from .prose import is_prose

        cells = []
        for src in self.cell_log[:-1]:  # the last one is the task cell itself
            text = src.strip()
            if not text or text.startswith(("%rlm", "%%rlm", "%load_ext rlm_kernel")):
                continue
            kernel = getattr(self.shell, "kernel", None)
            if kernel is not None and getattr(kernel, "prose_tasks", False) and is_prose(text):
                continue
            cells.append(src)
        return cells

    def _show_vars(self, names: list[str] | None) -> Any:
        from IPython.display import display

        from .widgets import VariablesView, variables_from_namespace

        view = VariablesView()
        view.update(variables_from_namespace(self.shell.user_ns, list(self.session.inputs(names))))
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
