"""The %rlm magic's mechanics in an in-process IPython shell (scripted model)."""

from __future__ import annotations

import nbformat
import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

from rlm_kernel.engine import RLM
from rlm_kernel.jupyter.prose import is_prose
from tests.jupyter.scripted_magic import script as scripted
from tests.replies import block


@pytest.fixture()
def ip(monkeypatch):
    start_ipython()  # the testing shell, once per process
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "rlm_kernel")
    shell.run_line_magic("config", "RLM.verify_answer = False")  # scripted replies: no check
    shell.user_ns.pop("rlm_answers", None)
    magics = shell.magics_manager.registry["RLMMagics"]
    magics.conversation.clear()  # one shell per process: each test a new conversation
    magics.tools = []
    magics.cell_log.clear()  # an export's setup cells are this test's own
    yield shell
    for name in ("context", "n", "rlm_answer"):
        shell.user_ns.pop(name, None)


def script(monkeypatch, replies):
    """The scripted model answers every task (the session's client seam); returns it
    and the model strings the session asked clients for."""
    seen = []
    return scripted(monkeypatch, replies, seen), seen



def test_cell_task_answers_into_the_namespace(ip, monkeypatch):
    script(monkeypatch, [block("n = len(context)\nprint(n)"), block("FINAL(n)")])
    ip.user_ns["context"] = "hello world"
    ip.run_cell("%%rlm --context context\nHow long is it?", store_history=True)
    assert ip.user_ns["rlm_answer"] == 11
    assert ip.user_ns["n"] == 11  # the model's variable is the user's now
    assert ip.user_ns["rlm_answers"][-1] == 11
    # the REPL's helpers are no names of the user's namespace after the run, but a cell
    # still finds them (an exported notebook re-runs): they are the shell's builtins
    assert "llm_query" not in ip.user_ns and "FINAL" not in ip.user_ns
    assert found(ip, "llm_query") is True


def found(ip, name: str) -> bool:
    """Whether a cell finds ``name`` callable (a silent cell: not in the export's log)."""
    ip.run_cell(f"_found = callable({name})", silent=True)
    return ip.user_ns.pop("_found", None)


def test_config_and_options_choose_the_model(ip, monkeypatch):
    _, seen = script(monkeypatch, [block("FINAL(1)"), block("FINAL(2)")])
    ip.user_ns["context"] = "x"
    ip.run_line_magic("config", "RLM.model = 'openai/configured'")
    try:
        ip.run_line_magic("rlm", "What?")
        ip.run_line_magic("rlm", "--model openai/option What?")
    finally:
        ip.run_line_magic("config", "RLM.model = ''")
    assert seen == ["openai/configured", "openai/option"]


def test_unknown_model_is_one_message_and_the_shell_survives(ip, capsys):
    ip.user_ns["context"] = "x"
    ip.run_line_magic("rlm", "--model no-such-model-xyz What?")
    err = capsys.readouterr().err
    assert "unknown model 'no-such-model-xyz'" in err
    assert ip.user_ns["context"] == "x"


def test_missing_context_variable_is_a_usage_error(ip):
    result = ip.run_cell("%rlm --context nope What?")
    assert "no variable named nope" in str(result.error_in_exec)


def test_export_writes_a_valid_notebook_with_setup_cells(ip, monkeypatch, tmp_path):
    script(monkeypatch, [block("print(len(context))"), block("FINAL(len(context))")])
    ip.run_cell("context = 'abc' * 3", store_history=True)
    ip.run_cell("%%rlm\nHow long?", store_history=True)
    out = tmp_path / "run.ipynb"
    ip.run_cell(f"%rlm export {out}", store_history=True)
    nb = nbformat.read(out, as_version=4)
    nbformat.validate(nb)
    roles = [c.metadata["rlm"]["role"] for c in nb.cells]
    # a record cell even with no sub-calls: it marks the re-run as one of a record
    assert roles == ["task", "setup", "recorded", "step", "step", "answer"]
    assert nb.cells[1].source == "context = 'abc' * 3"
    assert nb.cells[2].source == "%%rlm recorded\n[]"
    assert nb.cells[3].outputs[0]["text"] == "9\n"
    # a stock shell's steps take no count (shell_executor.numbers_steps): the task cell
    # keeps its own; the RLM kernel's steps have theirs (tests/jupyter/test_task_cell.py)
    assert nb.cells[3].execution_count is None
    assert nb.metadata.kernelspec.name == "rlm"


def test_final_outside_a_run_shows_the_answer_without_error(ip):
    result = ip.run_cell("FINAL(6 * 7)")
    assert result.success
    assert ip.user_ns["rlm_answer"] == 42


@pytest.mark.parametrize("text,prose", [
    ("Which chapter first mentions the whale?", True),
    ("Summarise the file.\nKeep it short.", True),
    ("print hello", False),          # a Python 2 habit, not a task
    ("prnt('hi'", False),            # code with a typo stays a SyntaxError
    ("x = [1, 2", False),
    ("for i in range(3) print(i)", False),
    ("len?", False),
    ("%time 1", False),
    ("!ls", False),
    ("1 + 1", False),
])
def test_prose_detection(text, prose):
    assert is_prose(text) is prose


def test_question_mark_at_the_end_stays_a_task(ip, monkeypatch):
    _, seen = script(monkeypatch, [block("FINAL('yes')")])
    ip.user_ns["context"] = "x"
    ip.run_cell("%rlm Which chapter first mentions the whale?")
    assert ip.user_ns["rlm_answer"] == "yes"


def test_prose_ending_in_a_question_mark_is_prose():
    assert is_prose("Which chapter first mentions the whale?")


def last_question(ip) -> str:
    magics = ip.magics_manager.registry["RLMMagics"]
    return list(magics.runs.values())[-1].result.question


@pytest.mark.parametrize("cell,question", [
    ("%rlm What's in context?", "What's in context?"),
    ('%rlm How many "needle" lines?', 'How many "needle" lines?'),
    ("%rlm Does it name C:\\temp\\new or a\\\\b?", "Does it name C:\\temp\\new or a\\\\b?"),
    ("%rlm What does -- mean, and --all?", "What does -- mean, and --all?"),
    ("%rlm How many {braces} and $dollars, $context or {len(context)}?",
     "How many {braces} and $dollars, $context or {len(context)}?"),
    ("%rlm Combien coûte l'œuvre « Moby‑Dick » ? 🐋", "Combien coûte l'œuvre « Moby‑Dick » ? 🐋"),
    ("%rlm   It's  spaced   inside?  ", "It's  spaced   inside?"),
    ("%rlm --max-iterations 3 --context context Isn't it 'quoted'?", "Isn't it 'quoted'?"),
    ("%rlm --model='' -- --help: what does it print?", "--help: what does it print?"),
    ("%rlm -- vars are what?", "vars are what?"),
    ("%rlm -5 plus 3?", "-5 plus 3?"),
    ("%%rlm --context context\nIt's \"quoted\" \\n {x} $y --z?\n", "It's \"quoted\" \\n {x} $y --z?"),
    ("%%rlm --max-iterations 2 Summarise:\nthe file's 'head'", "Summarise:\nthe file's 'head'"),
    ("%%rlm\n  Which file's \"first\" line?  \n\n", "Which file's \"first\" line?"),
])
def test_the_question_is_taken_as_typed(ip, monkeypatch, cell, question):
    script(monkeypatch, [block("FINAL('ok')")])
    ip.user_ns["context"] = "ok"
    result = ip.run_cell(cell)
    assert result.error_in_exec is None, result.error_in_exec
    assert last_question(ip) == question
    assert ip.user_ns["rlm_answer"] == "ok"


def test_options_before_the_question_reach_the_run(ip, monkeypatch):
    from rlm_kernel.jupyter.magic import parse_line

    opts, question = parse_line("--max-iterations 3 --max-cost=0.5 --context 'my var' "
                                "--context b --verify-answer Isn't --max-iterations 9 text?")
    assert (opts.max_iterations, opts.max_cost_usd, opts.context, opts.verify_answer) == \
        (3, 0.5, ["my var", "b"], True)
    assert question == "Isn't --max-iterations 9 text?"
    opts, question = parse_line("export run.ipynb --run abc")
    assert (opts.words, opts.run, question) == (["export", "run.ipynb"], "abc", "")


@pytest.mark.parametrize("line,message", [
    ("--max-iterations", "--max-iterations expects a value"),
    ("--max-iterations x What?", "expected a whole number, got 'x'"),
    ("--max-iterations 0 What?", "must be at least 1"),
    ("--bogus What?", "unknown option --bogus (a question that starts with --: %rlm -- --bogus"),
    ("--max-iter 3 What?", "unknown option --max-iter"),
    ('--model "unclosed What?', "No closing quotation"),
    ("", "no task given"),
    ("--max-iterations 3", "no task given"),
    ("export", "usage: %rlm export PATH.ipynb"),
    ("export all the data?", "(a question that starts with 'export': %rlm -- export ...)"),
    ("recorded", "%rlm recorded: not available as a line magic"),
])
def test_a_malformed_line_is_one_usage_error_with_the_usage_line(ip, line, message):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError) as info:
        ip.run_line_magic("rlm", line)
    assert message in str(info.value)
    assert "usage: %rlm" in str(info.value)


def test_final_outside_a_run_shows_any_value_through_the_guarded_text(ip, capsys):
    result = ip.run_cell("d = {('a', 1): 2}\nd['me'] = [d]\nFINAL(d)")
    assert result.success
    assert ip.user_ns["rlm_answer"] is ip.user_ns["d"]
    out = capsys.readouterr().out
    assert out.startswith("Final answer: {('a', 1): 2, 'me': [<Recursion on dict")


@pytest.mark.parametrize("form", ["%rlm export $out", "%rlm export {out}",
                                  "%rlm export {str(out)}"])
def test_a_sub_command_line_expands_variables_as_other_magics_do(ip, monkeypatch, tmp_path,
                                                                   form):
    script(monkeypatch, [block("FINAL('done')")])
    ip.user_ns["context"] = "abc"
    ip.run_cell("%rlm How long is {it}, $it?", store_history=True)
    ip.user_ns["out"] = tmp_path / "run.ipynb"
    result = ip.run_cell(form, store_history=True)
    assert result.error_in_exec is None, result.error_in_exec
    task = nbformat.read(tmp_path / "run.ipynb", as_version=4).cells[0].source
    assert "> How long is {it}, $it?\n" in task  # the question itself was not expanded


def test_a_run_gives_the_users_names_back(ip, monkeypatch):
    """The user's own ``search``, ``FINAL``, ``split_documents`` and ``context_0`` are
    theirs again after a run that used the REPL's; names the user did not have are
    gone again; their cells see their own names before and after."""
    script(monkeypatch, [block("print(len(search('b')))\nRLM_CONFIDENCE = 0.5"),
                         block("FINAL(split_documents()[None][:3])")])
    ip.run_cell("def search(x):\n    return 'mine: ' + x\nFINAL = 'my final'\n"
                "split_documents = [1, 2]\ncontext_0 = 'zero'\ncontext = 'a\\nb\\nc'",
                silent=True)
    ip.user_ns.pop("SHOW_VARS", None)
    mine = ip.user_ns["search"]
    try:
        ip.run_cell("%%rlm --context context\nq?", store_history=True)
        ns = ip.user_ns
        assert ns["rlm_answer"] == "a\nb"
        assert ns["search"] is mine and ns["FINAL"] == "my final"
        assert ns["split_documents"] == [1, 2] and ns["context_0"] == "zero"
        for name in ("SHOW_VARS", "llm_query", "rlm_history", "RLM_CONFIDENCE"):
            assert name not in ns, name
        ip.run_cell("_mine = search('x')", silent=True)
        assert ip.user_ns.pop("_mine") == "mine: x"
    finally:
        for name in ("search", "FINAL", "split_documents", "context_0"):
            ip.user_ns.pop(name, None)


def test_names_are_given_back_when_the_run_fails(ip, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("engine bug")

    monkeypatch.setattr(RLM, "run", broken)
    ip.run_cell("def search(x):\n    return x\ncontext = 'abc'", silent=True)
    mine = ip.user_ns["search"]
    try:
        result = ip.run_cell("%rlm --context context q?")
        assert isinstance(result.error_in_exec, RuntimeError)
        assert ip.user_ns["search"] is mine and "llm_query" not in ip.user_ns
    finally:
        ip.user_ns.pop("search", None)


def test_lent_namespace_restores_values_and_absence_on_interrupt():
    import builtins

    from rlm_kernel.jupyter.session import lent_namespace

    class Shell:
        user_ns = {"search": "mine", "keep": 1}
        builtin_trap = type("Trap", (), {"auto_builtins": {"llm_query": len}})()

    shell = Shell()
    builtins.llm_query = len  # as the builtin trap puts a session helper
    try:
        with pytest.raises(KeyboardInterrupt), lent_namespace(shell):
            assert not hasattr(builtins, "llm_query")  # hidden from model code
            shell.user_ns.update(search=print, llm_query=print, FINAL=print, keep=2)
            raise KeyboardInterrupt
        assert shell.user_ns == {"search": "mine", "keep": 2}  # keep is the run's work
        assert builtins.llm_query is len
    finally:
        del builtins.llm_query


def test_a_model_cannot_reach_the_session_helpers_by_deleting_a_name(ip, monkeypatch):
    script(monkeypatch, [block("del llm_query\ntry:\n    llm_query\n    print('reached')\n"
                               "except NameError:\n    print('hidden')"),
                         block("FINAL('ok')")])
    ip.user_ns["context"] = "x"
    ip.run_cell("%%rlm --context context\nq?", store_history=True)
    magics = ip.magics_manager.registry["RLMMagics"]
    last = list(magics.runs.values())[-1].result
    assert "hidden" in last.history.entries[0].output


def test_each_sub_command_has_its_own_parser_and_usage_line():
    from IPython.core.error import UsageError

    from rlm_kernel.jupyter.magic import COMMANDS, _command_parsers, parse_line

    assert sorted(_command_parsers()) == sorted(COMMANDS)
    with pytest.raises(UsageError, match="usage: %rlm replay"):
        parse_line("replay one.ipynb two.ipynb")
    with pytest.raises(UsageError, match="usage: %rlm vars"):
        parse_line("vars --run abc")  # --run is export's, replay's and continue's
    # options before a sub-command are kept; its own come after it
    opts, question = parse_line("--model openai/m replay --run abc --max-iterations 2")
    assert (opts.command, opts.model, opts.run, opts.max_iterations, question) == \
        ("replay", "openai/m", "abc", 2, "")
    opts, question = parse_line("-- vars are what?")  # an explicit -- makes it a question
    assert (opts.command, question) == (None, "vars are what?")


def test_the_session_makes_one_client_when_both_roles_have_one_model(ip):
    from rlm_kernel.engine import RLMConfig
    from rlm_kernel.jupyter.session import NotebookSession

    made = []
    session = NotebookSession(None, client_factory=lambda model: made.append(model) or
                              object())
    same = session.clients(RLMConfig(model="openai/a"))
    assert same["root_client"] is same["sub_client"] and made == ["openai/a"]
    other = session.clients(RLMConfig(model="openai/a", sub_model="openai/b"))
    assert other["root_client"] is not other["sub_client"]
    assert made == ["openai/a", "openai/a", "openai/b"]
    assert NotebookSession(None).clients(RLMConfig()) == {}  # the engine builds its own
