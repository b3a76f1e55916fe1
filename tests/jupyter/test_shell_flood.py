"""A notebook step that prints a flood: the model, the trajectory and ``%rlm export`` get
its head, one marker and its tail (where its last line is), as from every executor, in a
real ``rlm`` kernel (in the kernel's namespace and ``--isolated``) and through ``%rlm``
in a ``python3`` kernel, each started by jupyter_client; the live cell still stops at the
cap with its note."""

from __future__ import annotations

import json

import nbformat
import pytest

from rlm_kernel.text import PRINT_LESS
from tests.kernel_client import execute, printed_json, script_model, text_of
from tests.replies import block
from tests.test_text import MARKER, cut_of

LAST = "THE LAST LINE OF THE FLOOD"
FLOOD = "for i in range(25000):\n    print(f'line {i:06d}')\nprint('THE LAST LINE', 'OF THE FLOOD')"
"""300,027 characters of output (25,000 lines of 12 and the last one, which the code does
not spell: the live view shows the code)."""
RUN = "list(get_ipython().magics_manager.registry['RLMMagics'].runs.values())[-1]"


@pytest.mark.parametrize(("kernel_name", "task"), [
    ("rlm", "%rlm Count the lines."),
    ("python3", "%rlm Count the lines."),
    ("rlm", "%%rlm --isolated\nCount the lines."),  # the steps behind the process wall
])
def test_a_notebook_flood_reaches_the_model_trajectory_and_export_with_its_end(
        kc, kernel_name, task, tmp_path):
    if kernel_name == "python3":
        reply, _ = execute(kc, "%load_ext rlm_kernel")
        assert reply["content"]["status"] == "ok"
    script_model(kc, [block(FLOOD), block("FINAL('ok')")])
    reply, messages = execute(kc, task, timeout=120)
    assert reply["content"]["status"] == "ok", text_of(messages)
    out = tmp_path / "run.ipynb"
    seen = printed_json(kc, (
        f"import json\n_r = {RUN}\n"
        f"get_ipython().run_line_magic('rlm', 'export {out}')\n"
        "print(json.dumps({'prompt': _lm.calls[1][-1]['content'], "
        "'entry': _r.result.history.entries[0].output}))"))
    # the model's next message: its view of the step (cut once more, to its own size)
    # ends with the flood's last line, one marker between
    assert LAST in seen["prompt"] and cut_of(seen["prompt"])[1] == PRINT_LESS
    # the trajectory: head, one marker, tail, as the plain executor keeps it
    entry = seen["entry"]
    assert entry.startswith("line 000000\nline 000001\n") and entry.endswith(LAST + "\n")
    assert cut_of(entry)[1] == PRINT_LESS and "not shown live" not in entry
    # the export: the step cell's output is that record
    nb = nbformat.read(out, as_version=4)
    steps = [c for c in nb.cells if c.metadata.get("rlm", {}).get("role") == "step"]
    text = "".join(o.get("text", "") for o in steps[0].outputs
                   if o.get("output_type") == "stream")
    assert text.endswith(LAST + "\n") and len(MARKER.findall(text)) == 1
    assert "not shown live" not in text
    # the live view (the task cell, inline without the extension) stopped with its note
    live = json.dumps([m["content"] for m in messages])
    assert "not shown live" in live and LAST not in live


def test_a_flood_shown_while_the_step_runs_is_not_told_it_left_a_thread(kc):
    """The first large message a fresh kernel sends (here the task cell's view of a flood's
    live chunks, sent while the step sleeps) starts pyzmq's garbage collector of zero-copy frames: a thread of the
    kernel, not of the step, so the model is not told the step left one running."""
    code = "import time\nfor j in range(5):\n    print('x' * 30000)\n    time.sleep(0.15)\nprint('done')"
    script_model(kc, [block(code), block("FINAL('ok')")])
    reply, messages = execute(kc, "%rlm Print a lot.", timeout=120)
    assert reply["content"]["status"] == "ok", text_of(messages)
    seen = printed_json(kc, (
        f"import json, threading\n_r = {RUN}\n"
        "print(json.dumps({'entry': _r.result.history.entries[0].output, 'threads': "
        "[type(t).__name__ for t in threading.enumerate()]}))"))
    assert seen["entry"].rstrip().endswith("done")
    assert "thread(s) running" not in seen["entry"]
