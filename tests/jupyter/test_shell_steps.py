"""ShellExecutor on the in-process IPython shell: outputs, FINAL, errors, limits."""

from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

from rlm_kernel.executors import PlainExecutor
from rlm_kernel.executors.timeouts import timeout_message
from rlm_kernel.jupyter import shell_executor
from rlm_kernel.jupyter.shell_executor import ShellExecutor
from rlm_kernel.termination import FINAL
from rlm_kernel.text import MAX_KEPT_CHARS
from tests.test_text import MARKER


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


FLOOD = ("import sys\nfor i in range(30000):\n    print(f'line {i:06d}')\n"
         "print('THE LAST LINE')\n_ = sys.stderr.write('e' * 250000 + 'THE LAST ERROR')")
"""A step that prints 390,014 characters on stdout and 250,014 on stderr, each ending with
a line it would be a pity to lose."""


def test_a_flood_is_recorded_as_every_executor_keeps_it_and_shown_live_to_its_note(shell):
    """The step's record (the model's view, the trajectory) is the head, one marker and
    the tail, character for character what the plain executor keeps; the live view
    stops at the cap with its note."""
    seen = []
    res = ShellExecutor(shell, on_rich_output=seen.append).execute(FLOOD)
    plain = PlainExecutor().execute(FLOOD)
    assert (res.stdout, res.stderr) == (plain.stdout, plain.stderr)
    for text, last in ((res.stdout, "THE LAST LINE\n"), (res.stderr, "THE LAST ERROR")):
        assert text.endswith(last) and len(MARKER.findall(text)) == 1
        assert "not shown live" not in text
    assert res.stdout.startswith("line 000000\nline 000001\n")
    live = {name: "".join(o["text"] for o in seen if o.get("name") == name)
            for name in ("stdout", "stderr")}
    for text in live.values():
        assert text.endswith(f"[output beyond {MAX_KEPT_CHARS:,} characters is not shown "
                             "live]\n")
        assert "THE LAST" not in text and not MARKER.search(text)


def test_a_flood_keeps_the_steps_other_outputs_and_the_hosts_notes(shell):
    """Only the flooded stream's chunks are replaced: a result after it, a stream that
    stayed under the cap and the time limit's note are recorded as before."""
    res = ShellExecutor(shell).execute(
        "print('x' * 300000 + 'END')\nimport sys\nsys.stderr.write('small\\n')\n"
        "import time\ntime.sleep(5)", timeout=1)
    assert res.stdout.endswith("END\n") and len(MARKER.findall(res.stdout)) == 1
    assert res.stderr.startswith("small\n") and res.stderr.endswith(timeout_message(1))
    res = ShellExecutor(shell).execute("print('y' * 300000 + 'END')\n41 + 1")
    assert "42\n" in res.stdout.splitlines(keepends=True)
    assert "END\n" in res.stdout and len(MARKER.findall(res.stdout)) == 1


def test_the_shell_records_only_reads_that_ran(shell):
    """The notebook's executor keeps the executed-reads record as the others do (an
    IPython AST transformer for the step, removed after it)."""
    shell.user_ns["context"] = "hello"
    ex = ShellExecutor(shell)
    ex.read_watch = (frozenset({"context"}), frozenset())
    assert ex.execute("if False:\n    context\n_ = 'context'").names_read == frozenset()
    assert ex.execute("def f():\n    return len(context)\n").names_read == frozenset()
    res = ex.execute("print(f())\ny = context + 1")
    text = res.stdout + res.stderr
    assert "5\n" in text and "y = context + 1" in text and "TypeError" in text
    assert res.names_read == {"context"} and "__rlm_read__" not in text
    assert not any(type(t).__name__ == "ReadInstrumenter" for t in shell.ast_transformers)
    ex.read_watch = None
    assert ex.execute("len(context)").names_read is None
    for name in ("context", "f", "y", "_", "__rlm_read__"):
        shell.user_ns.pop(name, None)
