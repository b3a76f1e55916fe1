"""What the task cell shows in a real RLM kernel (started by jupyter_client; scripted
replies: the views are under test, not the model): its result is numbered with its own
execution count, not its last step's; a candidates run ends with one summary output in
the task cell, with or without the JupyterLab extension; a prose task cell is told to
the extension as prose; a run that cannot start leaves no progress block."""

from __future__ import annotations

import os

import pytest

from tests.kernel_client import announce_frontend, execute, running, script_model
from tests.replies import block

TWO_STEPS = [block("n = len(context)\nprint(n)"), block("FINAL(n)")]
CANDIDATES = [block("x = 41\nFINAL_VAR('x')"), block("print('two')"),
              block("x = 42\nFINAL_VAR('x')"), block("x = 42.0\nFINAL_VAR('x')")]


def results(messages: list[dict]) -> list[dict]:
    """The cell's own ``execute_result`` messages' contents."""
    return [m["content"] for m in messages if m["msg_type"] == "execute_result"]


def comm_data(messages: list[dict]) -> list[dict]:
    """The run messages (``rlm_kernel.run`` comm data) of a cell, in order."""
    return [m["content"]["data"] for m in messages
            if m["msg_type"] in ("comm_open", "comm_msg")
            and "type" in (m["content"].get("data") or {})]


@pytest.mark.parametrize("task", ["%%rlm\nHow long is the context?",
                                  "How long is the context?"])
def test_a_task_cells_result_carries_the_task_cells_own_count(kc, task):
    script_model(kc, TWO_STEPS)
    reply, _ = execute(kc, "context = 'hello world'")
    announce_frontend(kc)
    reply, messages = execute(kc, task, cell_id="task")
    assert reply["content"]["status"] == "ok"
    own = reply["content"]["execution_count"]
    steps = [d["execution_count"] for d in comm_data(messages) if d["type"] == "step_finished"]
    assert len(steps) == 2 and all(s > own for s in steps)  # the steps took counts
    (result,) = results(messages)
    assert result["data"]["text/plain"] == "11"
    assert result["execution_count"] == own  # Out[own], not Out[last step]
    (end,) = [d for d in comm_data(messages) if d["type"] == "run_finished"]
    assert (end["answer_source"], end["answer_note"]) == ("data", None)  # a plain success
    words = "The answer was computed by the model's code from your data."
    assert (end["tone"], end["ending"], end["ending_words"]) == ("ok", "data", words)
    reply, messages = execute(kc, f"print(Out[{own}], _{own})\n1 + 1")
    assert reply["content"]["execution_count"] > max(steps)
    assert "11 11" in "".join(m["content"].get("text", "") for m in messages)
    (after,) = results(messages)
    assert after["execution_count"] == reply["content"]["execution_count"]


def test_a_prose_task_cell_is_told_to_the_extension_as_prose(kc):
    script_model(kc, TWO_STEPS)
    execute(kc, "context = 'hello world'")
    announce_frontend(kc)
    _, prose = execute(kc, "How long is the context?", cell_id="a")
    _, magic = execute(kc, "%%rlm\nHow long is the context?", cell_id="b")
    assert [d["prose"] for d in comm_data(prose) if d["type"] == "run_started"] == [True]
    assert [d["prose"] for d in comm_data(magic) if d["type"] == "run_started"] == [False]


def test_run_finished_tells_the_extension_how_an_answer_was_reached(kc):
    script_model(kc, [block("n = 7\nprint(n)"), block("FINAL(n)")])
    execute(kc, "context = 'hello world'")
    announce_frontend(kc)
    _, messages = execute(kc, "%%rlm\nWhat is seven?", cell_id="task")
    (end,) = [d for d in comm_data(messages) if d["type"] == "run_finished"]
    assert end["answer"] == "7" and end["answer_source"] == "no_input"
    words = "The answer was reached without reading your data."
    assert (end["answer_note"], end["ending_words"], end["tone"]) == (words, words, "caution")
    progress = [m["content"]["data"]["text/html"] for m in messages
                if m["msg_type"] == "update_display_data"
                and "rlm-progress" in m["content"]["data"].get("text/html", "")]
    assert progress and 'data-rlm-end="warning"' in progress[-1]  # amber, not green
    assert 'data-rlm-tone="caution"' in progress[-1]
    assert words in progress[-1]  # the task cell says what the extension is sent


@pytest.mark.parametrize("extension", [True, False], ids=["extension", "inline"])
def test_a_candidates_run_ends_with_one_summary_output(kc, extension):
    script_model(kc, CANDIDATES)
    execute(kc, "context = 'hello'")
    if extension:
        announce_frontend(kc)
    reply, messages = execute(kc, "%%rlm --candidates 3\nWhat is it?", cell_id="task")
    assert reply["content"]["status"] == "ok"
    summaries = [m["content"]["data"] for m in messages if m["msg_type"] == "display_data"
                 and "Candidates:" in m["content"]["data"].get("text/plain", "")]
    assert len(summaries) == 1
    (summary,) = summaries
    assert summary["text/plain"].splitlines()[0] == \
        "Candidates: 3 ran · candidate 2 chosen (2 of 3 agreed on its answer)"
    page = summary["text/html"]
    assert page.count('<details class="rlm-candidate"') == 3
    assert "x = 41" in page and "x = 42.0" in page  # the others' steps, folded in
    data = comm_data(messages)
    if extension:
        added = [d for d in data if d["type"] == "step_added"]
        assert [d["metadata"]["rlm"]["role"] for d in added] == ["step"] * 4  # no summary cell
        (end,) = [d for d in data if d["type"] == "run_finished"]
        assert end["chosen"] == 2 and end["answer"] == "42"
        assert [c["index"] for c in end["candidates"]] == [1, 2, 3]
    else:
        assert data == []
        emptied = [m for m in messages if m["msg_type"] == "update_display_data"
                   and m["content"]["data"] == {}
                   and m["content"]["transient"]["display_id"].endswith(("-1-1", "-3-1"))]
        assert len(emptied) == 2  # the other candidates' blocks are taken away
    (result,) = results(messages)
    assert result["data"]["text/plain"] == "42"
    assert result["execution_count"] == reply["content"]["execution_count"]


def test_a_run_that_cannot_start_leaves_only_its_error():
    """A missing API key: the error is one line, and the progress and variables blocks
    shown while the run was starting are emptied (no stale "step 0 of 12")."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    with running("rlm", env=env) as (_, kc):
        execute(kc, "context = 'hello world'")
        reply, messages = execute(kc, "%%rlm --model openai/gpt-4o-mini\nHow long?")
    assert reply["content"]["status"] == "ok"
    shown = {m["content"]["transient"]["display_id"] for m in messages
             if m["msg_type"] == "display_data"}
    emptied = {m["content"]["transient"]["display_id"] for m in messages
               if m["msg_type"] == "update_display_data" and m["content"]["data"] == {}}
    assert len(shown) == 2 and emptied == shown  # both blocks are taken away
    others = [m for m in messages if m["msg_type"] == "update_display_data"
              and m["content"]["data"] != {}]
    assert others == []  # nothing else was drawn over them
    errors = "".join(m["content"]["text"] for m in messages
                     if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")
    assert errors.startswith("RLM: ") and "OPENAI_API_KEY" in errors, errors


def test_a_name_of_the_data_only_in_code_that_never_ran_is_no_read(kc):
    """Red-team case y09 in the notebook's own executor (the live namespace): dead code
    and a string naming ``context`` leave an invented answer a warning; a function that
    reads it, defined and called, makes the answer ``data``."""
    script_model(kc, [block("if False:\n    context\n_ = 'context'\nanswer = 6 * 7\n"
                            "FINAL(answer)"),
                      block("def f():\n    return len(context)\nFINAL(f())")])
    execute(kc, "context = 'hello world'")
    announce_frontend(kc)
    ends = []
    for cell in ("a", "b"):
        _, messages = execute(kc, "%%rlm\nHow long is the context?", cell_id=cell)
        ends += [d for d in comm_data(messages) if d["type"] == "run_finished"]
    assert [(e["answer"], e["answer_source"]) for e in ends] == [("42", "no_input"),
                                                                ("11", "data")]
