"""A run changes only what it should, in real kernels started by jupyter_client (scripted
replies: the session's mechanics, not the model): ``rlm_answer`` keeps the last answer
when a run ends without one; what a task without the user's data made up is not left in
the namespace, while a run with data keeps what its code made; a ``python3`` kernel with
``%load_ext rlm_kernel`` numbers its cells consecutively; the no-data notice is said
only once a run has really started."""

from __future__ import annotations

import json

import pytest

from tests.kernel_client import (
    THOUGHT,
    announce_frontend,
    execute,
    printed_json,
    script_model,
    text_of,
)
from tests.replies import block

KEPT = "rlm_answer still holds the previous answer"


def load(kc, kernel_name: str) -> None:
    if kernel_name == "python3":
        reply, _ = execute(kc, "%load_ext rlm_kernel", timeout=120)
        assert reply["content"]["status"] == "ok"


@pytest.mark.parametrize("kernel_name", ["rlm", "python3"])
def test_rlm_answer_keeps_the_last_answer_after_an_interrupted_run(kernel, kernel_name):
    km, kc = kernel
    load(kc, kernel_name)
    execute(kc, "context = 'a b c'")
    wait = block("import time\ntime.sleep(120)", THOUGHT)
    script_model(kc, [block("FINAL(len(context.split()))", THOUGHT), wait, wait],
                 widgets=False)
    reply, messages = execute(kc, "%%rlm\nHow many words?", timeout=120)
    assert reply["content"]["status"] == "ok", text_of(messages)
    assert printed_json(kc, "print(rlm_answer)") == 3
    interrupted: list[bool] = []

    def watch(m):  # interrupt once the step is shown (it runs next, for 120 s)
        if not interrupted and "time.sleep(120)" in json.dumps(m["content"]):
            interrupted.append(True)
            km.interrupt_kernel()

    reply, messages = execute(kc, "%%rlm\nWait a while.", timeout=120, on_message=watch)
    out = text_of(messages)
    assert interrupted and "stopped by interrupt" in out, out
    assert KEPT in out, out
    assert printed_json(kc, "import json\nprint(json.dumps([rlm_answer, rlm_answers]))") \
        == [3, [3, None]]


@pytest.mark.parametrize("kernel_name", ["python3"])
def test_python3_kernel_numbers_a_task_cell_and_the_next_cell_consecutively(kc, kernel_name):
    load(kc, kernel_name)
    execute(kc, "context = 'hello world'")
    script_model(kc, [block("n = len(context)\nprint(n)", THOUGHT),
                      block("1 + 1", THOUGHT), block("FINAL(n)", THOUGHT)])
    announce_frontend(kc)  # the JupyterLab extension makes step cells of the steps
    reply, messages = execute(kc, "%%rlm\nHow long is it?", cell_id="task")
    assert reply["content"]["status"] == "ok", text_of(messages)
    own = [m["content"]["execution_count"] for m in messages
           if m["msg_type"] == "execute_input"]
    results = [m["content"]["execution_count"] for m in messages
               if m["msg_type"] == "execute_result"]
    assert reply["content"]["execution_count"] == own[0]  # not the last step's
    assert results == own  # Out[own]: the step's `1 + 1` took no Out entry of its own
    steps = [m["content"]["data"] for m in messages if m["msg_type"] == "comm_msg"
             and (m["content"].get("data") or {}).get("type") == "step_finished"]
    assert len(steps) == 3 and all(d["execution_count"] is None for d in steps), steps
    reply, messages = execute(kc, f"print(Out.get({own[0]}))")
    assert reply["content"]["execution_count"] == own[0] + 1  # no count skipped
    assert text_of(messages).strip() == "11"


@pytest.mark.parametrize("kernel_name,prefix", [("rlm", ""), ("python3", "%%rlm\n")])
def test_a_task_without_data_takes_away_the_names_its_code_made_up(kc, kernel_name, prefix):
    load(kc, kernel_name)
    execute(kc, "def mine():\n    return 'kept'\nimport os")
    script_model(kc, [block("context = 'a made-up text'\nimport re\n"
                            "def helper():\n    return 1\nprint('STEP RAN')",
                            THOUGHT),
                      block("FINAL(len(context))", THOUGHT),
                      block("words = context.split()\nFINAL(len(words))", THOUGHT)],
                 widgets=False)
    reply, messages = execute(kc, f"{prefix}How long is the text?", cell_id="cell-1")
    out = text_of(messages)
    assert reply["content"]["status"] == "ok", out
    assert "STEP RAN" in out
    assert ("RLM: this task had no data of yours, so the names its code made were removed: "
            "context, re, helper.") in out, out
    got = printed_json(kc, "import json\nprint(json.dumps({'names': [n for n in "
                           "('context', 're', 'helper', 'mine', 'os') if n in globals()], "
                           "'mine': mine(), 'os': type(os).__name__, "
                           "'answer': rlm_answer}))")
    # the user's own names stay; only what the run added is gone; the answer is kept
    assert got == {"names": ["mine", "os"], "mine": "kept", "os": "module", "answer": 14}
    # with data of the user's, what the model's code makes stays: the REPL's working state
    execute(kc, "context = 'a b'")
    reply, messages = execute(kc, f"{prefix}How many words?", cell_id="cell-2")
    out = text_of(messages)
    assert "removed" not in out, out
    assert printed_json(kc, "print(json.dumps(words))") == ["a", "b"]


def test_the_no_data_notice_is_not_said_before_a_start_that_fails(kc):
    execute(kc, "import os\nos.environ.pop('OPENAI_API_KEY', None)\n"
                "%config RLM.widgets = False")
    reply, messages = execute(kc, "%rlm --model openai/gpt-4o-mini What is two plus two?")
    out = text_of(messages)
    assert "OPENAI_API_KEY" in out, out
    assert "no data of yours" not in out, out
    # a start that succeeds says it first, before the run's first step
    script_model(kc, [block("print('STEP RAN')", THOUGHT), block("FINAL(4)", THOUGHT)],
                 widgets=False)
    reply, messages = execute(kc, "%rlm What is two plus two?")
    out = text_of(messages)
    assert out.index("RLM: this task has no data of yours") < out.index("STEP RAN"), out


def test_continuing_a_task_without_data_gets_back_what_its_earlier_steps_made(kc):
    script_model(kc, [block("n = 6\nprint(n)", THOUGHT), block("half = n // 3\nprint(half)",
                                                                  THOUGHT),
                      block("FINAL(half)", THOUGHT), block("FINAL(half)", THOUGHT)],
                 widgets=False)
    reply, messages = execute(kc, "%rlm How much is a third of six?", cell_id="task-1")
    assert "names its code made were removed: n, half." in text_of(messages)
    # its step 1 is not run again: what it made is put back for the continuation
    reply, messages = execute(kc, "%%rlm continue --from 2\nhalf = n // 2\nprint(half)",
                              cell_id="task-1")
    out = text_of(messages)
    assert reply["content"]["status"] == "ok" and "NameError" not in out, out
    assert "names its code made were removed: n, half." in out, out
    assert printed_json(kc, "import json\nprint(json.dumps([rlm_answers, 'n' in globals()]))") \
        == [[2, 3], False]
