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
    assert "1. Task: How many r letters are there?" in prompt and "Answer: 3" in prompt
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
