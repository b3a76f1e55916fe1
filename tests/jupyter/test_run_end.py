"""The end of a run in a real RLM kernel (started by jupyter_client; scripted replies):
its live views give way to a static rendering, so a saved notebook reads well after the
kernel is gone; the stopped-run message counts its steps right; ``%rlm export`` takes
the run of the cell that asks; an exported notebook's metadata is what the kernel
reports (JupyterLab opens it unmodified)."""

from __future__ import annotations

import re

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from nbformat import v4

from rlm_kernel import RLM
from rlm_kernel.export import export_run
from rlm_kernel.models.scripted import ScriptedModel
from tests.kernel_client import (
    THOUGHT,
    announce_frontend,
    execute,
    script_model,
    script_model_code,
    text_of,
)
from tests.replies import block

WIDGET = "application/vnd.jupyter.widget-view+json"
DATA = "context = 'hello world'\nhits = ['x' * 100, 'y' * 100]"
HITS = [block("n = len(hits)\nprint(n)", THOUGHT), block("FINAL(n)", THOUGHT)]


def stderr_of(messages: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in messages
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stderr")


def stdout_of(messages: list[dict]) -> str:
    return "".join(m["content"]["text"] for m in messages
                   if m["msg_type"] == "stream" and m["content"]["name"] == "stdout")


@pytest.mark.parametrize("extension", [True, False], ids=["extension", "inline"])
def test_a_runs_widgets_become_static_html_and_text_when_it_ends(kc, extension):
    if extension:
        announce_frontend(kc)
    execute(kc, DATA)
    script_model(kc, HITS, max_iterations=4)
    reply, messages = execute(kc, "%rlm How many hits?", cell_id="task-1")
    assert reply["content"]["status"] == "ok"
    shown = [m for m in messages if m["msg_type"] == "display_data"
             and WIDGET in m["content"]["data"]]
    assert len(shown) == 2, [m["msg_type"] for m in messages]
    ids = [m["content"]["transient"]["display_id"] for m in shown]
    models = [m["content"]["data"][WIDGET]["model_id"] for m in shown]
    updates = [(i, m) for i, m in enumerate(messages) if m["msg_type"] == "update_display_data"
               and m["content"]["transient"]["display_id"] in ids]
    assert [m["content"]["transient"]["display_id"] for _, m in updates] == ids
    progress, variables = (m["content"]["data"] for _, m in updates)
    assert set(progress) == set(variables) == {"text/html", "text/plain"}
    # the final state: the steps run and the stop reason, a full bar; not "step 2 of 4"
    assert progress["text/plain"].startswith("RLM run: 2 steps, final · "), progress
    assert "completion tokens" in progress["text/plain"]
    assert "width:100%" in progress["text/html"] and "of 4" not in progress["text/html"]
    assert re.search(r"\nhits +list +2 items +\[", variables["text/plain"]), variables
    assert "Variables the model sees" in variables["text/html"]
    # then the two widgets' comms close: nothing is left for a frontend to look up
    closes = {m["content"]["comm_id"]: i for i, m in enumerate(messages)
              if m["msg_type"] == "comm_close"}
    assert set(models) <= set(closes)
    assert min(closes[c] for c in models) > max(i for i, _ in updates)


def test_a_notebook_run_by_nbclient_keeps_the_summary_and_no_widget(tmp_path):
    from nbclient import NotebookClient

    nb = v4.new_notebook(cells=[v4.new_code_cell(script_model_code(HITS, max_iterations=4)),
                                v4.new_code_cell(DATA),
                                v4.new_code_cell("%rlm How many hits?")])
    nb.metadata["kernelspec"] = {"name": "rlm", "display_name": "RLM (Python)",
                                 "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="rlm").execute()
    path = tmp_path / "saved.ipynb"
    nbformat.write(nb, path)
    saved = nbformat.read(path, as_version=4)
    task = saved.cells[2]
    assert not [o for c in saved.cells for o in c.get("outputs", [])
                if WIDGET in o.get("data", {})], "a widget view was saved"
    plain = [o.data["text/plain"] for o in task.outputs if o.output_type == "display_data"]
    assert any(p.startswith("RLM run: 2 steps, final · ") for p in plain), plain
    assert any(re.search(r"hits +list +2 items", p) for p in plain), plain
    assert all("text/html" in o.data for o in task.outputs if o.output_type == "display_data")
    assert [o.data["text/plain"] for o in task.outputs if o.output_type == "execute_result"] \
        == ["2"]


def test_a_stopped_runs_message_counts_its_steps_right(kc):
    execute(kc, "context = 'hello world'")
    script_model(kc, [block("print(1)", THOUGHT)] * 3, max_llm_calls=1)
    _, messages = execute(kc, "%rlm Go on", cell_id="task-1")
    # a budget stop is not an error: said on stdout, not in red on stderr
    assert "stopped by budget" in stdout_of(messages) and not stderr_of(messages)
    assert "(1 step kept)" in stdout_of(messages), stdout_of(messages)
    script_model(kc, [block("print(1)", THOUGHT)] * 3, max_llm_calls=2)
    _, messages = execute(kc, "%rlm Go on", cell_id="task-1")
    assert "(2 steps kept)" in stdout_of(messages), stdout_of(messages)


def test_a_stuck_runs_message_says_why_once(kc):
    execute(kc, "context = 'hello world'")
    same = block("print('the same output every time')", THOUGHT)
    script_model(kc, [same] * 4 + [block("FINAL('so far')", THOUGHT)])
    _, messages = execute(kc, "%rlm Go on", cell_id="task-1")
    out = stdout_of(messages)
    assert re.search(r"stopped by stuck: step \d+ repeats", out), out
    assert "stuck: stuck" not in out and not stderr_of(messages)


def test_with_the_extension_a_stop_is_said_by_the_view_alone(kc):
    """With the JupyterLab extension the progress view's ending and the answer cell say
    that the run stopped and why: no line of the magic's says it again."""
    announce_frontend(kc)
    execute(kc, "context = 'hello world'")
    same = block("print('the same output every time')", THOUGHT)
    script_model(kc, [same] * 4 + [block("FINAL('so far')", THOUGHT)])
    _, messages = execute(kc, "%rlm Go on", cell_id="task-1")
    assert "stopped by" not in stdout_of(messages) + stderr_of(messages), stdout_of(messages)
    ends = [m["content"]["data"] for m in messages if m["msg_type"] == "comm_msg"
            and (m["content"]["data"] or {}).get("type") == "run_finished"]
    assert len(ends) == 1 and ends[0]["ending_words"].count("repeated itself") == 1, ends
    assert ends[0]["tone"] == "caution", ends


def test_export_takes_the_run_of_the_cell_that_asks(kc, tmp_path):
    """The toolbar's export sends the selected task cell's id (``metadata.cellId``):
    that cell's last run is exported, the session's last run only when it ran none;
    ``--run`` wins over both."""
    announce_frontend(kc)
    execute(kc, "context = 'hello world'")
    script_model(kc, [block("FINAL('a')", THOUGHT), block("FINAL('b')", THOUGHT),
                      block("FINAL('a2')", THOUGHT)])
    execute(kc, "%rlm First task", cell_id="cell-a")
    execute(kc, "%rlm Second task", cell_id="cell-b")
    execute(kc, "%rlm First task again", cell_id="cell-a")

    def export(name: str, cell_id: str, extra: str = "") -> dict:
        path = tmp_path / name
        reply, messages = execute(kc, f"%rlm export {path}{extra}", cell_id=cell_id)
        assert reply["content"]["status"] == "ok", text_of(messages)
        return nbformat.read(path, as_version=4).metadata["rlm"]

    assert export("a.ipynb", "cell-a")["question"] == "First task again"
    second = export("b.ipynb", "cell-b")
    assert second["question"] == "Second task"
    assert export("none.ipynb", "cell-without-runs")["question"] == "First task again"
    assert export("run.ipynb", "cell-a", f" --run {second['run_id']}")["question"] \
        == "Second task"


def test_an_exported_notebooks_metadata_is_what_the_kernel_reports(kc, tmp_path):
    """JupyterLab writes the kernel's ``language_info`` and kernelspec into a notebook it
    opens; when the notebook already holds the same, it opens unmodified."""
    script_model(kc, [block("FINAL('a')", THOUGHT)])
    execute(kc, "context = 'hello world'")
    execute(kc, "%rlm Task", cell_id="c")
    reply, messages = execute(kc, f"%rlm export {tmp_path / 'run.ipynb'}", cell_id="c")
    assert reply["content"]["status"] == "ok", text_of(messages)
    kc.kernel_info()
    info = kc.get_shell_msg(timeout=30)
    while info["msg_type"] != "kernel_info_reply":
        info = kc.get_shell_msg(timeout=30)
    reported = info["content"]["language_info"]
    exported = nbformat.read(tmp_path / "run.ipynb", as_version=4).metadata
    assert exported["language_info"] == reported
    spec = KernelSpecManager().get_kernel_spec("rlm")
    assert exported["kernelspec"] == {"name": "rlm", "display_name": spec.display_name,
                                      "language": spec.language}
    # the command line's export (no kernel involved) writes the same
    lm = ScriptedModel([block("FINAL(1)")])
    result = RLM(root_client=lm, sub_client=lm, verify_answer=False,
                 ground_answer=False).run("q", context="abc")
    export_run(result, tmp_path / "cli.ipynb")
    assert nbformat.read(tmp_path / "cli.ipynb", as_version=4).metadata["language_info"] \
        == reported
