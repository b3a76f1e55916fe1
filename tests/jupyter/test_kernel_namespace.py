"""The user's namespace is the user's, in real kernels: loading the extension and
running tasks (``%%rlm`` and prose cells) leave the user's own ``search``, ``FINAL``,
``split_documents`` and ``context_0`` as they were, and add none of the REPL's names;
cells still find the REPL's helpers outside runs (an exported notebook re-runs)."""

from __future__ import annotations

import pytest

from tests.kernel_client import execute, printed_json, script_model, text_of
from tests.replies import block

USER_CELL = ("def search(x):\n    return 'mine: ' + x\nFINAL = 'my final'\n"
             "split_documents = [1, 2]\ncontext_0 = 'zero'\ncontext = 'a b c'")
REPORT = ("import json\nprint(json.dumps({'search': search('x'), 'FINAL': FINAL, "
          "'split_documents': split_documents, 'context_0': context_0, "
          "'added': sorted(n for n in ('llm_query', 'SHOW_VARS', 'FINAL_VAR', 'rlm_history', "
          "'code_outline') if n in get_ipython().user_ns), "
          "'answer': globals().get('rlm_answer')}))")


def report(kc) -> dict:
    return printed_json(kc, REPORT)


USERS = {"search": "mine: x", "FINAL": "my final", "split_documents": [1, 2],
         "context_0": "zero", "added": []}


@pytest.mark.parametrize("kernel_name,task", [
    ("rlm", "What is in the context?"),               # a prose cell
    ("python3", "%%rlm\nWhat is in the context?"),   # %load_ext in another kernel
])
def test_tasks_leave_the_users_names_alone(kc, kernel_name, task):
    execute(kc, USER_CELL, timeout=60)
    if kernel_name == "python3":
        execute(kc, "%load_ext rlm_kernel", timeout=120)
    assert report(kc) == {**USERS, "answer": None}  # loading took nothing
    script_model(kc, [block("print(search('b')[:1])\nx = split_documents()"),
                      block("FINAL(len(context))")], widgets=False)
    reply, messages = execute(kc, task, timeout=300)
    assert reply["content"]["status"] == "ok", text_of(messages)
    assert report(kc) == {**USERS, "answer": 5}
    # outside a run the helpers are fallbacks a cell finds when it has no own name
    reply, messages = execute(kc, "del search\nprint(callable(search), "
                                  "callable(llm_query))", timeout=60)
    assert text_of(messages).split() == ["True", "True"], text_of(messages)
