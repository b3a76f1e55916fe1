"""Hostile model code in a real RLM kernel (started by jupyter_client): the kernel
answers the next cell, the user's namespace and the host's state survive."""

from __future__ import annotations

import threading
import time

from tests.kernel_client import (
    THOUGHT,
    announce_frontend,
    execute,
    script_model,
    text_of,
)
from tests.replies import block


def test_exit_in_model_code_leaves_the_kernel_running(kernel):
    km, kc = kernel
    script_model(kc, [block("exit()", THOUGHT), block("quit()", THOUGHT),
                      block("import sys\nsys.exit(1)", THOUGHT), block("FINAL('alive')", THOUGHT)])
    reply, messages = execute(kc, "kept = 'user data'\n")
    reply, messages = execute(kc, "%rlm Which is it?")
    assert reply["content"]["status"] == "ok"
    time.sleep(1.0)
    assert km.is_alive()
    reply, messages = execute(kc, "import sys\nprint(kept, rlm_answer, sys.stdin.closed)")
    assert text_of(messages).strip() == "user data alive False"


def test_rebound_builtins_do_not_outlive_the_step(kernel):
    _, kc = kernel
    script_model(kc, [block("import builtins\nbuiltins.len = lambda x: 42\nbuiltins.print = None",
                            THOUGHT),
                      block("FINAL('x')", THOUGHT)])
    execute(kc, "%rlm Break things")
    _, messages = execute(kc, "print(len([1, 2]))")
    assert text_of(messages).strip() == "2"


def test_a_thread_left_running_does_not_print_into_the_next_cell(kernel):
    _, kc = kernel
    chatter = ("import threading, time\n"
               "def chatter():\n"
               "    for i in range(400):\n"
               "        print('bg', i)\n"
               "        time.sleep(0.01)\n"
               "threading.Thread(target=chatter, daemon=True).start()")
    script_model(kc, [block(chatter, THOUGHT), block("FINAL('x')", THOUGHT)])
    execute(kc, "%rlm Start a thread")
    _, messages = execute(kc, "import time\ntime.sleep(1)\nprint('mine')")
    assert text_of(messages).strip() == "mine"


def test_interrupt_of_a_swallowing_loop_ends_the_cell(kernel):
    km, kc = kernel
    swallow = "import time\nwhile True:\n    try:\n        time.sleep(1)\n    except BaseException:\n        pass"
    script_model(kc, [block(swallow, THOUGHT), block("FINAL('after')", THOUGHT)], step_timeout=5.0)
    timer = threading.Timer(2.0, km.interrupt_kernel)
    timer.start()
    start_at = time.monotonic()
    reply, messages = execute(kc, "%rlm Loop for ever", timeout=60)
    took = time.monotonic() - start_at
    timer.cancel()
    assert took < 20, f"the cell took {took:.0f} s with a 5 s step limit"
    _, messages = execute(kc, "print(1 + 1)")
    assert text_of(messages).strip() == "2"


def test_a_print_flood_is_few_messages_in_the_frontend(kernel):
    _, kc = kernel
    announce_frontend(kc)
    script_model(kc, [block("for i in range(200_000):\n    print(i)", THOUGHT),
                      block("FINAL('x')", THOUGHT)])
    reply, messages = execute(kc, "%rlm Flood", timeout=120, cell_id="flood-cell")
    assert reply["content"]["status"] == "ok"
    outputs = [m for m in messages if m["msg_type"] == "comm_msg"
               and (m["content"].get("data") or {}).get("type") == "step_output"]
    assert 0 < len(outputs) < 300, f"{len(outputs)} step_output messages"
    assert len(messages) < 1000


def test_rerunning_a_task_cell_closes_its_last_widgets(kernel):
    _, kc = kernel
    script_model(kc, [block("FINAL('x')", THOUGHT)] * 3)
    opened, closed = 0, 0
    for _ in range(3):
        _, messages = execute(kc, "%rlm Again", cell_id="same-cell")
        opened += sum(m["msg_type"] == "comm_open"
                      and m["content"].get("target_name") == "jupyter.widget" for m in messages)
        closed += sum(m["msg_type"] == "comm_close" for m in messages)
    assert opened <= 3 * 2 + 2, f"{opened} widget comms for 3 runs"
    assert closed >= 4  # the first two runs' progress and variables views
