"""A run changes only what it should, in real kernels started by jupyter_client (scripted
replies: the session's mechanics, not the model): ``rlm_answer`` keeps the last answer
when a run ends without one; what a task without the user's data made up is not left in
the namespace, while a run with data keeps what its code made; a ``python3`` kernel with
``%load_ext rlm_kernel`` numbers its cells consecutively; the no-data notice is said
only once a run has really started."""

from __future__ import annotations

import pytest

from tests.kernel_client import (
    THOUGHT,
    announce_frontend,
    execute,
    script_model,
    text_of,
)
from tests.replies import block


def load(kc, kernel_name: str) -> None:
    if kernel_name == "python3":
        reply, _ = execute(kc, "%load_ext rlm_kernel", timeout=120)
        assert reply["content"]["status"] == "ok"


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
