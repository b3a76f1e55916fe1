"""``%rlm continue`` in a real kernel: a run goes on from one of its steps, the step's
code edited in a ``%%rlm continue --from N`` cell (scripted replies: the mechanics)."""

from __future__ import annotations

import json

from tests.kernel_client import (
    THOUGHT,
    announce_frontend,
    execute,
    script_model,
    text_of,
)
from tests.replies import block


def comm_data(messages: list[dict]) -> list[dict]:
    return [m["content"]["data"] for m in messages
            if m["msg_type"] in ("comm_open", "comm_msg") and "type" in m["content"].get("data", {})]


def test_continue_from_an_edited_step_replaces_the_later_steps(kc):
    announce_frontend(kc)
    execute(kc, "context = 'abcdef'")
    script_model(kc, [block("n = len(context)\nprint(n)", THOUGHT),
                      block("half = n // 3\nprint(half)", THOUGHT),
                      block("FINAL(half)", THOUGHT), block("FINAL(half)", THOUGHT)])
    reply, first = execute(kc, "%rlm How much is half the length?", cell_id="task-1")
    assert reply["content"]["status"] == "ok"
    first_run = comm_data(first)[0]["run_id"]
    reply, messages = execute(kc, f"%%rlm continue --from 2 --run {first_run}\n"
                                  "half = n // 2\nprint(half)", cell_id="task-1")
    assert reply["content"]["status"] == "ok", text_of(messages)
    data = comm_data(messages)
    started = data[0]
    assert started["type"] == "run_started"
    assert started["continues"] == {"run_id": first_run, "from_step": 2}
    added = [d for d in data if d["type"] == "step_added"]
    assert [d["step"] for d in added] == [2, 3]
    assert "half = n // 2" in added[0]["source"]
    finished = [d for d in data if d["type"] == "run_finished"]
    assert finished[0]["answer"] == "3"
    reply, messages = execute(kc, "import json; print(json.dumps([rlm_answers, "
                                  "len(get_ipython().magics_manager.registry['RLMMagics'].runs)]))")
    answers, runs = json.loads(text_of(messages))
    assert answers == [2, 3] and runs == 2  # the original run is kept (exportable)


def test_continue_needs_a_step_and_a_run(kc):
    reply, messages = execute(kc, "%rlm continue --from 2")
    assert "no run yet" in text_of(messages)
    reply, messages = execute(kc, "%rlm continue")
    assert "usage: %rlm continue" in text_of(messages)
