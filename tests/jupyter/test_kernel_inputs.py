"""Protected inputs in real kernels (started by jupyter_client): only what the user
loaded or named is a task's input; a variable model code made is never one, after
``%%rlm --new``, when a task cell runs again, or in a later task, and a task with no data
says so in its cell before any model call.  Scripted model: the session's mechanics."""

from __future__ import annotations

import pytest

from tests.kernel_client import execute, printed_json, script_model, text_of
from tests.replies import block

STATE = ("import json\n_r = list(get_ipython().magics_manager.registry['RLMMagics'].runs"
         ".values())[-1].result\n"
         "print(json.dumps({'hits': globals().get('hits'), "
         "'warned': any('read-only' in e.output for e in _r.history.entries), "
         "'listed': [v.name for v in _r.variables], "
         "'told': _r.root_prompts[0][1]['content']}))")


def state(kc) -> dict:
    return printed_json(kc, STATE)


def task(kc, text: str, cell_id: str) -> str:
    reply, messages = execute(kc, text, timeout=300, cell_id=cell_id)
    assert reply["content"]["status"] == "ok", text_of(messages)
    return text_of(messages)


@pytest.mark.parametrize("kernel_name,prefix", [("rlm", ""), ("python3", "%%rlm\n")])
def test_a_variable_model_code_made_is_never_a_protected_input(kc, kernel_name, prefix):
    if kernel_name == "python3":
        execute(kc, "%load_ext rlm_kernel", timeout=120)
    execute(kc, "context = 'a b c'", timeout=60)
    script_model(kc, [block("hits = context.split()\nFINAL(len(hits))"),
                      block("hits = ['new']\nFINAL(len(hits))"),
                      block("hits = ['again']\nFINAL(len(hits))"),
                      block("hits = None\nprint(1)"), block("FINAL(2)")],
                 widgets=False)
    task(kc, f"{prefix}How many words are in the context?", "cell-1")
    # a new conversation: hits stays what model code made, not the user's input
    task(kc, "%%rlm --new\nReplace the hits.", "cell-2")
    got = state(kc)
    assert got["hits"] == ["new"] and not got["warned"]
    assert got["listed"] == ["context"] and "Variable: `hits`" not in got["told"]
    # the first task cell run again: what its last run made is not protected either
    task(kc, f"{prefix}How many words are in the context?", "cell-1")
    got = state(kc)
    assert got["hits"] == ["again"] and not got["warned"]
    assert got["listed"] == ["context"]
    # once the user assigns it in a cell, it is theirs: an input, put back
    execute(kc, "hits = ['mine']", timeout=60)
    task(kc, f"{prefix}Use the hits.", "cell-3")
    got = state(kc)
    assert got["hits"] == ["mine"] and got["warned"]
    assert got["listed"] == ["context", "hits"]


def test_a_task_with_no_data_says_so_first_and_its_invented_context_is_not_the_users(kc):
    script_model(kc, [block("context = {'data': 'a sample'}\nprint('STEP RAN')"),
                      block("FINAL('data')"), block("FINAL('no data')")],
                 widgets=False)
    out = task(kc, "What is in the data?", "cell-1")
    notice = "RLM: this task has no data of yours. The namespace holds no data variable."
    assert notice in out and "%%rlm --context" in out
    assert out.index(notice) < out.index("STEP RAN")  # said before the first step
    # what it made up is not left in the namespace as if it were the user's
    assert "the names its code made were removed: context." in out, out
    out = task(kc, "How long is it?", "cell-2")
    assert notice in out, out
    got = state(kc)
    assert got["listed"] == []  # nothing invented is given as the user's data
    assert "Variables it left" not in got["told"], got["told"]
