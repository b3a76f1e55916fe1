"""ShellExecutor on the in-process IPython shell: outputs, FINAL, errors, limits."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

from rlm_kernel.executors.timeouts import timeout_message
from rlm_kernel.jupyter import shell_executor
from rlm_kernel.jupyter.shell_executor import ShellExecutor
from rlm_kernel.termination import FINAL


@pytest.fixture()
def shell():
    start_ipython()
    ip = InteractiveShell.instance()
    ip.user_ns["FINAL"] = FINAL
    yield ip
    for name in ("x", "FINAL"):
        ip.user_ns.pop(name, None)


def test_stdout_result_and_rich_outputs(shell):
    seen = []
    ex = ShellExecutor(shell, on_rich_output=seen.append)
    streamed = []
    res = ex.execute("x = 2\nprint('hi')\nx * 21", on_output=lambda n, t: streamed.append((n, t)))
    assert res.success and res.final_output is None
    # the stream is flushed at the end of the step, after the result (as before the split)
    assert sorted(res.stdout.splitlines()) == ["42", "hi"] and res.stderr == ""
    assert sorted(o["output_type"] for o in seen) == ["execute_result", "stream"]
    assert ("stdout", "hi\n") in streamed
    assert isinstance(ex.last_execution_count, int)
    assert not hasattr(ex, "last_outputs")  # written and never read: gone


def test_final_error_and_exit(shell):
    ex = ShellExecutor(shell)
    res = ex.execute("FINAL('done')")
    assert res.success and res.final_output == {"answer": "done", "type": "direct"}
    res = ex.execute("1 / 0")
    assert not res.success and "ZeroDivisionError" in res.stdout  # an error output, not a stream
    res = ex.execute("exit()")
    assert "exit() ignored" in res.stdout + res.stderr


def test_timeout_is_told_once(shell):
    res = ShellExecutor(shell).execute("import time\ntime.sleep(5)", timeout=0.3)
    assert not res.success
    assert res.stderr.endswith(timeout_message(0.3))


def test_outputs_past_the_cap_are_counted(shell, monkeypatch):
    monkeypatch.setattr(shell_executor, "MAX_OUTPUTS", 3)
    seen = []
    res = ShellExecutor(shell, on_rich_output=seen.append).execute(
        "from IPython.display import display\nfor i in range(6):\n    display(i)")
    assert len(seen) == 3
    assert "[3 more outputs of this step dropped]" in res.stderr
