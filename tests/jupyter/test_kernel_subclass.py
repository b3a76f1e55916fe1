"""The RLM kernel's behaviour comes from its methods, never from patching a live kernel:
the task cell's own execution count (``RLMKernel.do_execute``) and no status for other
channels' requests while a run goes (``RLMKernel._publish_status``).  A ``python3``
kernel with ``%load_ext rlm_kernel`` has neither (ipykernel offers no hook): its task
cell shows the last step's count.  Scripted replies, real kernels, no model."""

from __future__ import annotations

import json
import queue
import time
from typing import Any

import pytest
from ipykernel.kernelbase import Kernel

from rlm_kernel.jupyter.kernel import RLMKernel
from tests.kernel_client import THOUGHT, execute, script_model, text_of
from tests.replies import block


def reply_block(code: str) -> str:
    """A scripted model reply running ``code`` as one step."""
    return block(code, THOUGHT)


# -- the status filter, as a unit ---------------------------------------------------------
class _Published(Kernel):
    """Below RLMKernel in the probe's MRO, in place of ipykernel's ``_publish_status``:
    records what would be published."""

    def _publish_status(self, status: str, channel: str, parent: Any = None) -> None:
        self.published.append((status, channel, parent))


class _Probe(RLMKernel, _Published):
    """RLMKernel's own ``_publish_status`` over a recorder; ``run_in_progress`` set by
    the test instead of read from the magic."""

    run_in_progress = False


@pytest.fixture()
def probe() -> _Probe:
    assert _Probe.__mro__.index(_Published) < _Probe.__mro__.index(Kernel)
    kernel = _Probe.__new__(_Probe)  # no sockets, no shell: only the method under test
    kernel.published = []
    return kernel


def test_status_filter_publishes_everything_outside_a_run(probe):
    for status in ("busy", "idle"):
        for channel in ("shell", "control"):
            probe._publish_status(status, channel)
    probe._publish_status("starting", "shell")
    assert [p[:2] for p in probe.published] == [("busy", "shell"), ("busy", "control"),
                                                ("idle", "shell"), ("idle", "control"),
                                                ("starting", "shell")]


def test_status_filter_drops_other_channels_during_a_run(probe):
    probe.run_in_progress = True
    parent = {"header": {"msg_type": "create_subshell_request"}}
    probe._publish_status("busy", "control", parent)
    probe._publish_status("idle", "control", parent)
    probe._publish_status("busy", "shell", {"header": {"msg_type": "execute_request"}})
    probe._publish_status("idle", "shell")
    assert [p[:2] for p in probe.published] == [("busy", "shell"), ("idle", "shell")]
    assert probe.published[0][2] == {"header": {"msg_type": "execute_request"}}
    probe.run_in_progress = False
    probe._publish_status("idle", "control", parent)
    assert probe.published[-1] == ("idle", "control", parent)


# -- real kernels -------------------------------------------------------------------------
@pytest.fixture(params=["rlm", "python3"])
def kernel_name(request) -> str:
    return request.param


@pytest.fixture()
def kernel(kernel, kernel_name):
    """tests/conftest.py's kernel, of each kind, with ``%load_ext rlm_kernel``:
    ``(kernel name, client)``."""
    _, kc = kernel
    reply, _ = execute(kc, "%load_ext rlm_kernel")
    assert reply["content"]["status"] == "ok"
    return kernel_name, kc


def kernel_value(kc, code: str) -> Any:
    """The JSON printed by ``code`` run in the kernel."""
    reply, messages = execute(kc, code)
    assert reply["content"]["status"] == "ok", text_of(messages)
    return json.loads(text_of(messages))


SHADOWED = """\
import json as _json
_k = get_ipython().kernel
print(_json.dumps([type(_k).__name__,
                   [n for n in vars(_k) if callable(getattr(type(_k), n, None))]]))"""


def test_no_method_of_the_running_kernel_is_an_instance_attribute(kernel):
    name, kc = kernel
    script_model(kc, [reply_block("x = 6 * 7\nprint(x)"), reply_block("FINAL(x)")])
    reply, messages = execute(kc, "%rlm What is six times seven?")
    assert reply["content"]["status"] == "ok", text_of(messages)
    kind, shadowed = kernel_value(kc, SHADOWED)
    assert kind == ("RLMKernel" if name == "rlm" else "IPythonKernel")
    assert shadowed == []  # do_execute, _publish_status ... all the class's own
    assert kernel_value(kc, "import json; _k = get_ipython().kernel\n"
                            "print(json.dumps(['do_execute' in vars(_k), "
                            "'_publish_status' in vars(_k)]))") == [False, False]


def test_task_cell_execution_count(kernel):
    """Both kernels reply with the task cell's own count: the RLM kernel's steps take the
    counts after it; a ``python3`` kernel's take none (it replies ``count - 1``, the
    shell's counter after the cell), so no count is shown twice or skipped."""
    name, kc = kernel
    script_model(kc, [reply_block("x = 6 * 7\nprint(x)"), reply_block("y = x + 1"),
                      reply_block("FINAL(y)")])
    reply, messages = execute(kc, "%rlm What is six times seven, plus one?")
    assert reply["content"]["status"] == "ok", text_of(messages)
    started = [m["content"]["execution_count"] for m in messages
               if m["msg_type"] == "execute_input"]
    steps = kernel_value(kc, "import json\nprint(json.dumps(sorted(get_ipython()."
                             "magics_manager.registry['RLMMagics'].step_counts)))")
    if name == "rlm":
        assert steps == list(range(started[0] + 1, started[0] + 4))
    else:
        assert steps == [], steps
    count = reply["content"]["execution_count"]
    assert count == started[0], (name, count, steps)
    reply, _ = execute(kc, "1 + 1")  # an ordinary cell: the next count after the reading
    assert reply["content"]["execution_count"] == (steps or [started[0]])[-1] + 2


def _statuses_of(kc, msg_id: str, until: str, timeout: float = 60) -> tuple[list[str], bool]:
    """IOPub status states whose parent is ``msg_id``, read until the ``until``
    request's idle; also whether anything of ``until`` was seen."""
    states, seen, deadline = [], False, time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            m = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        parent = m["parent_header"].get("msg_id")
        if m["msg_type"] == "status" and parent == msg_id:
            states.append(m["content"]["execution_state"])
        if parent == until:
            seen = True
            if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
                return states, seen
    raise AssertionError(f"no idle for {until} after {timeout} s (statuses: {states})")


def test_control_requests_during_a_run_publish_no_status(kernel):
    """As JupyterLab does when a run's widgets appear: a ``create_subshell_request``
    on the control channel mid-run.  The RLM kernel publishes no status for it (the
    frontend would read its ``idle`` as the kernel's state); a ``python3`` kernel
    does (no hook: a frontend has to ignore it, as the JupyterLab extension does)."""
    name, kc = kernel
    script_model(kc, [reply_block("import time\nprint('waiting')\ntime.sleep(4)"),
                      reply_block("FINAL('done')")])
    task = kc.session.msg("execute_request", {
        "code": "%rlm Wait a little, then say done.", "silent": False,
        "store_history": True, "user_expressions": {}, "allow_stdin": False,
        "stop_on_error": True})
    kc.shell_channel.send(task)
    task_id = task["header"]["msg_id"]
    deadline = time.monotonic() + 60
    while True:  # the run's widgets (or its first step) are on the page: it runs
        m = kc.get_iopub_msg(timeout=max(0.5, deadline - time.monotonic()))
        if m["parent_header"].get("msg_id") == task_id and m["msg_type"] in (
                "comm_open", "display_data"):
            break
    request = kc.session.msg("create_subshell_request", {})
    kc.control_channel.send(request)
    reply = kc.get_control_msg(timeout=30)
    assert reply["parent_header"]["msg_id"] == request["header"]["msg_id"]
    during, seen = _statuses_of(kc, request["header"]["msg_id"], until=task_id)
    assert seen
    assert during == ([] if name == "rlm" else ["busy", "idle"]), (name, during)
    assert kc.get_shell_msg(timeout=30)["content"]["status"] == "ok"
    # after the run: published again, as in any kernel
    after = kc.session.msg("list_subshell_request", {})
    kc.control_channel.send(after)
    kc.get_control_msg(timeout=30)
    marker = kc.execute("pass")
    states, _ = _statuses_of(kc, after["header"]["msg_id"], until=marker)
    assert states == ["busy", "idle"]


STEP_SWAPS = """\
_sh = get_ipython()
swapped = sorted(n for n in ('_showtraceback', '_get_exc_info', 'ask_exit')
                 if getattr(getattr(_sh, n), '__func__', None) is not getattr(type(_sh), n))
from IPython.display import display as _display
_display('shown by the step')"""

STEP_OUTPUTS = """\
import json
_run = list(get_ipython().magics_manager.registry['RLMMagics'].runs.values())[-1]
print(json.dumps([o.get('data', {}).get('text/plain') for o in _run.step_outputs[0]]))"""


def test_a_step_in_the_rlm_kernel_swaps_no_method_of_the_shell(kernel):
    """During a step the RLM kernel's shell (``RLMShell``, its ``shell_class``) routes the
    step's output with its own methods: each is the class's (ipykernel's start-up code
    leaves ``_showtraceback`` bound on the instance, still the class's function).  A
    ``python3`` kernel's stock shell has the smallest swap for the step's length (and
    its methods back afterwards).  In both the step's display is the step's output."""
    name, kc = kernel
    execute(kc, "context = 'some data'")  # a task with data keeps what its steps made
    script_model(kc, [reply_block(STEP_SWAPS), reply_block("FINAL('done')")])
    reply, messages = execute(kc, "%rlm Show something, then say done.")
    assert reply["content"]["status"] == "ok", text_of(messages)
    swapped = kernel_value(kc, "import json; print(json.dumps(swapped))")
    assert swapped == ([] if name == "rlm" else ["_get_exc_info", "_showtraceback",
                                                 "ask_exit"]), (name, swapped)
    assert "'shown by the step'" in kernel_value(kc, STEP_OUTPUTS)
    kind = kernel_value(kc, "import json; print(json.dumps(type(get_ipython()).__name__))")
    assert kind == ("RLMShell" if name == "rlm" else "ZMQInteractiveShell")
    assert kernel_value(kc, "import json; _sh = get_ipython(); print(json.dumps("
                            "[n for n in ('_showtraceback', '_get_exc_info', 'ask_exit') if "
                            "getattr(getattr(_sh, n), '__func__', None) is not "
                            "getattr(type(_sh), n)]))") == []  # all back after the run
