"""%rlm in a notebook session: follow-up tasks, ``--returns``, ``%rlm tools``, ``--new``,
and what the step cell shows when an input is put back.  In-process IPython shell,
scripted model (the magic's mechanics; the embedded model runs the notebook in
``notebooks/`` and the kernel tests)."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from tests.jupyter.scripted_magic import magics, quiet_shell, script
from tests.replies import block


@pytest.fixture()
def shell(ip):
    yield from quiet_shell(ip, ("context", "red", "hits", "rlm_answer", "shout", "rlm_history", "Pkg"))


def test_a_follow_up_task_is_told_the_earlier_one(shell, monkeypatch):
    script(monkeypatch, [block("red = [c for c in context if c == 'r']\nFINAL(len(red))"),
                         block("FINAL(len(red) * 2)")])
    shell.user_ns["context"] = "red rover"
    shell.run_cell("%rlm How many r letters are there?")
    assert shell.user_ns["rlm_answer"] == 3
    shell.run_cell("%rlm And twice that many?")
    assert shell.user_ns["rlm_answer"] == 6
    run = list(magics(shell).runs.values())[-1]
    prompt = run.result.root_prompts[0][1]["content"]
    assert "It follows the previous task: How many r letters are there?\nIts answer: 3\n" in prompt
    assert "Variables it left: red (list" in prompt
    assert [t.question for t in magics(shell).conversation.tasks] == [
        "How many r letters are there?", "And twice that many?"]
    # the export of the follow-up re-creates the earlier task's variables first
    assert any(c.startswith("# earlier task 1: How many r letters") and "red = [" in c
               for c in run.setup_cells)


def test_new_starts_a_fresh_conversation(shell, monkeypatch):
    script(monkeypatch, [block("FINAL(1)"), block("FINAL(2)")])
    shell.user_ns["context"] = "x"
    shell.run_cell("%rlm first?")
    shell.run_cell("%%rlm --new\nsecond?")
    run = list(magics(shell).runs.values())[-1]
    assert "Earlier tasks" not in run.result.root_prompts[0][1]["content"]
    assert [t.question for t in magics(shell).conversation.tasks] == ["second?"]


def test_follow_ups_can_be_switched_off(shell, monkeypatch):
    script(monkeypatch, [block("FINAL(1)"), block("FINAL(2)")])
    shell.user_ns["context"] = "x"
    shell.run_line_magic("config", "RLM.follow_ups = False")
    try:
        shell.run_cell("%rlm first?")
        shell.run_cell("%rlm second?")
    finally:
        shell.run_line_magic("config", "RLM.follow_ups = True")
    run = list(magics(shell).runs.values())[-1]
    assert "Earlier tasks" not in run.result.root_prompts[0][1]["content"]


def test_an_earlier_tasks_scratch_variable_is_working_state_not_an_input(shell, monkeypatch,
                                                                         capsys):
    script(monkeypatch, [block("hits = [1, 2]\nFINAL(len(hits))"),
                         block("hits = [3]\ncontext = 'gone'\nprint(hits)"),
                         block("FINAL(hits)")])
    shell.user_ns["context"] = "data"
    shell.run_cell("%rlm q1?")
    shell.run_cell("%rlm q2?")
    assert shell.user_ns["hits"] == [3]  # rebinding the earlier scratch variable stands
    assert shell.user_ns["context"] == "data"  # the user's input was put back
    run = list(magics(shell).runs.values())[-1]
    out = run.result.history.entries[0].output
    assert "context is the task's input and read-only" in out and "hits" not in out.split(
        "Warning")[-1]
    # the step's cell shows the notice the model got
    shown = "".join(o.get("text", "") for o in run.step_outputs[0])
    assert "context is the task's input and read-only" in shown


def test_returns_gives_the_answer_as_the_type(shell, monkeypatch):
    script(monkeypatch, [block("FINAL('a b'.split()[0])"), block("FINAL(['a', 'b'])")])
    shell.user_ns["context"] = "a b"
    shell.run_cell("%%rlm --returns 'list[str]'\nWhich words?")
    assert shell.user_ns["rlm_answer"] == ["a", "b"]
    run = list(magics(shell).runs.values())[-1]
    assert "FINAL not accepted: expected list[str]" in run.result.history.entries[0].output


def test_returns_resolves_the_notebooks_own_classes(shell, monkeypatch):
    shell.run_cell("from dataclasses import dataclass\n@dataclass\nclass Pkg:\n"
                   "    name: str\n    size: int")
    script(monkeypatch, [block("FINAL({'name': 'bash', 'size': '7'})")])
    shell.user_ns["context"] = "x"
    shell.run_cell("%%rlm --returns Pkg\nWhich package?")
    answer = shell.user_ns["rlm_answer"]
    assert type(answer).__name__ == "Pkg" and answer.size == 7


def test_a_bad_returns_type_is_a_usage_error(shell):
    with pytest.raises(UsageError, match="unknown type name 'Nope'"):
        magics(shell).rlm("--returns Nope what?")


def test_tools_are_offered_listed_and_removed(shell, monkeypatch, capsys):
    shell.run_cell('def shout(text: str) -> str:\n    """Upper-case a text."""\n'
                   "    return text.upper()")
    shell.run_line_magic("rlm", "tools add shout")
    assert "- shout(text: str) -> str: Upper-case a text." in capsys.readouterr().out
    script(monkeypatch, [block("FINAL(shout(context))")])
    shell.user_ns["context"] = "hey"
    shell.run_cell("%rlm Shout the context.")
    assert shell.user_ns["rlm_answer"] == "HEY"
    run = list(magics(shell).runs.values())[-1]
    assert "- shout(text: str) -> str: Upper-case a text." in \
        run.result.root_prompts[0][1]["content"]
    shell.run_line_magic("rlm", "tools remove shout")
    assert magics(shell).tools == []


def test_bad_tools_get_a_clear_error(shell):
    shell.user_ns["hits"] = [1]
    with pytest.raises(UsageError, match="'hits' is not callable"):
        magics(shell).rlm("tools add hits")
    with pytest.raises(UsageError, match="no nothing_here in the namespace"):
        magics(shell).rlm("tools add nothing_here")
    shell.user_ns["search"] = len
    with pytest.raises(UsageError, match="'search' is reserved"):
        magics(shell).rlm("tools add search")
    with pytest.raises(UsageError, match="is not a tool"):
        magics(shell).rlm("tools remove hits")


def test_a_tools_llm_calls_count_against_the_budget(shell, monkeypatch):
    shell.run_cell('def ask(text: str) -> str:\n    """Ask the helper model."""\n'
                   "    return llm_query(text)")
    shell.run_line_magic("rlm", "tools add ask")
    script(monkeypatch, [block("print(ask('a'))\nprint(ask('b'))"), block("FINAL(ask('c'))")])
    shell.user_ns["context"] = "x"
    shell.run_cell("%%rlm --max-llm-calls 3\nAsk thrice.")
    run = list(magics(shell).runs.values())[-1]
    # the first root call and the tool's two sub-calls use up the budget of 3
    assert run.result.stopped_by == "budget" and run.result.llm_calls == 3
    assert [c["prompt"] for c in run.result.history.entries[0].llm_calls] == ["a", "b"]
    shell.run_line_magic("rlm", "tools remove ask")


def test_the_variables_view_shows_a_tool_as_the_model_is_told_it():
    from rlm_kernel.jupyter.variables_view import variables_from_namespace

    def ask(text: str) -> str:
        """Ask the helper model.

        More detail."""
        return text

    [x, tool] = variables_from_namespace({"x": [1, 2], "ask": ask}, ["x", "ask"])
    assert (x.total_length, x.length_unit) == (2, "items")
    assert tool.type_name == "function" and tool.preview == \
        "ask(text: str) -> str: Ask the helper model."


# -- protected inputs are what the user loaded or named; what model code made never is ----
def _task_message(shell) -> str:
    return list(magics(shell).runs.values())[-1].result.root_prompts[0][1]["content"]


def _warnings(shell) -> str:
    run = list(magics(shell).runs.values())[-1]
    return "\n".join(e.output for e in run.result.history.entries)


def _listed(prompt: str, name: str) -> bool:
    """Whether the task message lists ``name`` among the variables (the user's data)."""
    return f"Variable: `{name}`" in prompt


def test_after_new_a_variable_model_code_made_is_not_an_input(shell, monkeypatch):
    script(monkeypatch, [block("hits = [1, 2]\nFINAL(len(hits))"),
                         block("hits = [3]\nprint(hits)"), block("FINAL(hits)")])
    shell.user_ns["context"] = "data"
    shell.run_cell("%rlm q1?")
    shell.run_cell("%%rlm --new\nq2?")
    assert shell.user_ns["hits"] == [3]  # rebinding it stands: not put back
    assert "read-only" not in _warnings(shell)
    prompt = _task_message(shell)
    assert _listed(prompt, "context") and not _listed(prompt, "hits")  # not the user's data


def test_a_re_run_task_cell_does_not_protect_what_its_last_run_made(shell, monkeypatch):
    import rlm_kernel.jupyter.magic as magic_module

    monkeypatch.setattr(magic_module, "_cell_id", lambda shell: "cell-7")
    script(monkeypatch, [block("hits = [1, 2]\nFINAL(len(hits))"),
                         block("hits = [5]\nFINAL(len(hits))")])
    shell.user_ns["context"] = "data"
    shell.run_cell("%rlm count?")
    shell.run_cell("%rlm count?")  # the same cell again: it replaces its earlier task
    assert shell.user_ns["hits"] == [5] and shell.user_ns["rlm_answer"] == 1
    assert "read-only" not in _warnings(shell)
    assert not _listed(_task_message(shell), "hits")
    assert [t.question for t in magics(shell).conversation.tasks] == ["count?"]


def test_a_later_task_is_told_model_made_variables_as_made_by_code(shell, monkeypatch):
    script(monkeypatch, [block("hits = [1, 2]\nFINAL(len(hits))"), block("FINAL(len(hits))")])
    shell.user_ns["context"] = "data"
    shell.run_cell("%rlm q1?")
    shell.run_cell("%rlm q2?")
    prompt = _task_message(shell)
    assert not _listed(prompt, "hits")
    assert "Variables it left: hits (list" in prompt
    assert "made by their code, not given by the user" in prompt


def test_what_the_user_assigns_or_names_is_theirs_and_protected(shell, monkeypatch):
    script(monkeypatch, [block("hits = [1, 2]\nFINAL(len(hits))"),
                         block("hits = None\nprint(1)"), block("FINAL(hits)"),
                         block("red = None\nprint(1)"), block("FINAL(red)")])
    shell.user_ns["context"] = "data"
    shell.run_cell("%rlm q1?")
    shell.run_cell("hits = hits")  # the user's cell takes it, even as the same object
    shell.run_cell("%rlm q2?")
    assert shell.user_ns["hits"] == [1, 2]
    assert "hits is the task's input and read-only" in _warnings(shell)
    assert _listed(_task_message(shell), "hits")
    shell.user_ns["red"] = "model-made?"  # made by code (not a cell): named, it is theirs
    magics(shell).made.note(["red"], shell.user_ns)
    shell.run_cell("%%rlm --new --context red\nq3?")
    assert shell.user_ns["red"] == "model-made?"
    assert "red is the task's input and read-only" in _warnings(shell)


def test_a_task_with_no_data_says_so_before_any_model_call(shell, monkeypatch, capsys):
    told: list[str] = []

    def first_reply(messages):
        told.append(capsys.readouterr().out)  # what the cell showed before this call
        return block("context = {'data': 'This is a sample text'}\nprint(context)")

    script(monkeypatch, [first_reply, block("FINAL('data')"), block("print(2)"),
                         block("FINAL(2)")])
    from rlm_kernel.jupyter.session import user_variables

    for name in user_variables(shell.user_ns):  # data earlier tests of this shell left
        monkeypatch.delitem(shell.user_ns, name)
    shell.run_cell("%%rlm --new\nWhat is in the data?")
    assert "RLM: this task has no data of yours. The namespace holds no data variable." \
        in told[0]
    assert "%%rlm --context" in told[0]
    # the invented context is not left in the namespace, nor given to a later task
    assert "context" not in shell.user_ns
    assert "the names its code made were removed: context." in capsys.readouterr().out
    shell.run_cell("%rlm And how long is it?")
    out = capsys.readouterr().out
    assert "The namespace holds no data variable." in out
    prompt = _task_message(shell)
    assert not _listed(prompt, "context")
    assert "Variables it left" not in prompt


def test_assigned_names_reads_a_cells_bindings():
    from rlm_kernel.jupyter.session import assigned_names

    assert assigned_names("a = 1\nb, c = 2, 3\nfor d in []: pass\ndel e\nimport os.path\n"
                          "from x import y as z\ndef f(): g = 1\nclass K: pass\n"
                          "(w := 4)") == {"a", "b", "c", "d", "e", "os", "z", "f", "g", "K",
                                           "w"}
    assert assigned_names("Which file is the largest?") == set()


def test_an_isolated_tasks_results_are_model_made_not_the_users(shell, monkeypatch):
    script(monkeypatch, [block("hits = [r * 2 for r in context]\nFINAL(len(hits))"),
                         block("hits = []\nprint(1)"), block("FINAL(len(hits))")])
    shell.user_ns["context"] = [1, 2, 3]
    shell.run_cell("%%rlm --isolated --results hits\nDouble them.")
    assert shell.user_ns["hits"] == [2, 4, 6]
    assert magics(shell).made.names(shell.user_ns) >= {"hits"}
    shell.run_cell("%rlm How many hits now?")  # in-process: hits is no input to put back
    assert shell.user_ns["hits"] == [] and "read-only" not in _warnings(shell)
    assert not _listed(_task_message(shell), "hits")
