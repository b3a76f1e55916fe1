"""Real kernels started by jupyter_client, running tasks on the real local model."""

from __future__ import annotations

import ast
import random
import time

import pytest

from evals.questions import defines_function_question, stdlib_dir
from tests.kernel_client import announce_frontend, execute

pytestmark = pytest.mark.slow

LOAD_JSON_PACKAGE = (
    "from rlm_kernel.context.files import load_folder\n"
    f"context = {{k: v for k, v in load_folder({str(stdlib_dir() / 'json')!r}).items() "
    "if k.endswith('.py')}\n"
    "kept = 'user data'"
)


@pytest.fixture()
def kernel(local_server, kernel):
    """tests/conftest.py's kernel, started after the embedded model's server (it finds
    the server through its state file)."""
    return kernel


def comm_data(messages: list[dict]) -> list[dict]:
    out = []
    for m in messages:
        if m["msg_type"] in ("comm_open", "comm_msg") and (
                m["content"].get("target_name", "rlm_kernel.run") == "rlm_kernel.run"):
            data = m["content"].get("data") or {}
            if "type" in data:
                out.append(data)
    return out


def value_of(kc, expr: str):
    reply, _ = execute(kc, f"__v = repr({expr})")
    assert reply["content"]["status"] == "ok"
    msg = kc.session.msg("execute_request", {"code": "", "silent": True, "store_history": False,
                                             "user_expressions": {"v": expr},
                                             "allow_stdin": False})
    kc.shell_channel.send(msg)
    rep = kc.get_shell_msg(timeout=30)
    data = rep["content"]["user_expressions"]["v"]
    assert data["status"] == "ok", data
    return ast.literal_eval(data["data"]["text/plain"])


@pytest.mark.parametrize("kernel_name", ["rlm"])
def test_prose_task_in_rlm_kernel_streams_comm_messages(kernel):
    km, kc = kernel
    q = defines_function_question("json", random.Random(0))
    reply, _ = execute(kc, LOAD_JSON_PACKAGE)
    assert reply["content"]["status"] == "ok"
    announce_frontend(kc)
    busy_seen: list[str] = []

    def watch(m):
        if m["msg_type"] in ("comm_open", "comm_msg"):
            busy_seen.append((m["content"].get("data") or {}).get("type", "?"))

    reply, messages = execute(kc, q.text, cell_id="task-cell-1", on_message=watch)
    assert reply["content"]["status"] == "ok"
    data = comm_data(messages)
    kinds = [d["type"] for d in data]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert kinds.count("step_added") == kinds.count("step_finished") >= 1
    assert all(d["cell_id"] == "task-cell-1" for d in data)
    assert len({d["run_id"] for d in data}) == 1
    # each step: added, then its outputs, then finished, in order
    order = [(d["type"], d.get("step")) for d in data if d["type"].startswith("step_")]
    for i, (kind, step) in enumerate(order):
        if kind == "step_output":
            assert ("step_added", step) in order[:i] and ("step_finished", step) in order[i:]
    finished = [d for d in data if d["type"] == "step_finished"]
    assert all(isinstance(d["execution_count"], int) for d in finished)
    # the task cell keeps its own count; the steps' counts follow it
    assert reply["content"]["execution_count"] < min(d["execution_count"] for d in finished)
    last = data[-1]
    assert last["stopped_by"] == "final" and q.check(last["answer"])
    # the comm messages arrived before the cell went idle, i.e. while it was busy
    states = [(i, m["content"]["execution_state"]) for i, m in enumerate(messages)
              if m["msg_type"] == "status"]
    busy_at, idle_at = states[0], states[-1]
    assert busy_at[1] == "busy" and idle_at[1] == "idle" and idle_at[0] == len(messages) - 1
    rlm_positions = [i for i, m in enumerate(messages) if m["msg_type"] in ("comm_open", "comm_msg")
                     and "type" in (m["content"].get("data") or {})]
    assert busy_at[0] < rlm_positions[0] and rlm_positions[-1] < idle_at[0]
    assert [t for t in busy_seen if t != "?"][0] == "run_started"
    assert q.check(str(value_of(kc, "rlm_answer")))
    # variables the model made are in the user's namespace; the user's own are intact
    added = [d for d in data if d["type"] == "step_added"]
    names = {t.id for d in added for node in ast.walk(ast.parse(d["source"]))
             for t in getattr(node, "targets", []) if isinstance(t, ast.Name)}
    for name in names:
        assert value_of(kc, f"{name!r} in globals()") is True
    assert value_of(kc, "kept") == "user data"


@pytest.mark.parametrize("kernel_name", ["python3"])
def test_rlm_magic_in_python3_kernel_renders_inline(kernel):
    km, kc = kernel
    q = defines_function_question("json", random.Random(0))
    execute(kc, "%load_ext rlm_kernel")
    reply, _ = execute(kc, LOAD_JSON_PACKAGE)
    assert reply["content"]["status"] == "ok"
    reply, messages = execute(kc, f"%%rlm --context context\n{q.text}")
    assert reply["content"]["status"] == "ok"
    assert not comm_data(messages)  # no extension: no run comm
    blocks = [m["content"]["data"] for m in messages
              if m["msg_type"] in ("display_data", "update_display_data")
              and "text/html" in m["content"]["data"]
              and "Step 1" in m["content"]["data"]["text/plain"]]
    assert blocks, "no inline step block"
    assert "<details" in blocks[-1]["text/html"]
    results = [m["content"]["data"]["text/plain"] for m in messages
               if m["msg_type"] == "execute_result"]
    assert results and q.check(results[-1])
    started = [m["content"]["execution_count"] for m in messages
               if m["msg_type"] == "execute_input"]
    # a plain ipykernel replies with the shell's counter after the cell: the steps take
    # no count of their own there, so the task cell keeps its own and nothing is skipped
    steps = value_of(kc, "sorted(get_ipython().magics_manager.registry['RLMMagics']"
                         ".step_counts)")
    assert steps == [] and reply["content"]["execution_count"] == started[0]
    assert q.check(str(value_of(kc, "rlm_answer")))


@pytest.mark.parametrize("kernel_name", ["rlm"])
def test_interrupt_mid_run_keeps_namespace_and_steps(kernel):
    km, kc = kernel
    reply, _ = execute(kc, LOAD_JSON_PACKAGE)
    announce_frontend(kc)
    interrupted = []

    def watch(m):
        data = (m["content"].get("data") or {}) if m["msg_type"] == "comm_msg" else {}
        if data.get("type") == "step_finished" and not interrupted:
            interrupted.append(time.monotonic())
            km.interrupt_kernel()

    task = ("Look at each file of context one at a time in separate steps: print the first "
            "line of one file per step, and only after ten steps call FINAL.")
    reply, messages = execute(kc, task, cell_id="task-2", on_message=watch)
    assert interrupted, "no step finished before the run ended"
    data = comm_data(messages)
    assert data[-1]["type"] == "run_finished" and data[-1]["stopped_by"] == "interrupt"
    assert sum(d["type"] == "step_finished" for d in data) >= 1
    assert value_of(kc, "kept") == "user data"
    assert value_of(kc, "len(context)") > 0
    reply, _ = execute(kc, "1 + 1")
    assert reply["content"]["status"] == "ok"
