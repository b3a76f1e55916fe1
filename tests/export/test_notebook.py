"""Trajectory export: a run becomes a valid notebook that re-runs top to bottom.

Runs are driven by a scripted model (mechanics only, no real model here).
"""

from __future__ import annotations

import json
import time

import nbformat
import pytest

import rlm_kernel.engine.rlm
from rlm_kernel.cli import main
from rlm_kernel.engine.budget import Budget, BudgetGuard
from rlm_kernel.engine.repl_functions import REPLFunctions
from rlm_kernel.export import cli_setup_cells, export_run
from rlm_kernel.export.notebook import language_info
from rlm_kernel.models import UsageLedger
from rlm_kernel.models.scripted import ScriptedModel
from rlm_kernel.termination import FinalOutput
from tests.replies import block
from tests.scripted import scripted_rlm

STEPS = [
    block("n = len(context)\nprint(n)", thought="First, measure.\n\nThen look."),
    block("summary = llm_query('sum up ' + context[:5])\nprint(summary)"),
    block("FINAL(f'{n} chars: {summary}')", thought="Done."),
]


def run(replies=STEPS, context="hello world", **cfg):
    rlm, _ = scripted_rlm(replies, model="scripted/root", cost_usd=0.002, **cfg)
    return rlm.run("How long?", context=context)


def roles(nb):
    return [c.metadata["rlm"]["role"] for c in nb.cells]


def test_cells_in_order_with_roles_sources_and_outputs():
    res = run()
    nb = export_run(res, run_id="r1", setup_cells=["context = 'hello world'"])
    nbformat.validate(nb)
    assert nb.nbformat == 4
    assert roles(nb) == ["task", "setup", "recorded", "step", "step", "step", "answer"]
    assert all(c.metadata["rlm"]["run_id"] == "r1" for c in nb.cells)
    assert [c.metadata["rlm"]["step"] for c in nb.cells] == [None, None, None, 1, 2, 3, None]
    task, setup, recorded, s1, s2, s3, answer = nb.cells
    assert recorded.source.startswith("%%rlm recorded\n")
    assert [e["prompt"] for e in json.loads(recorded.source.split("\n", 1)[1])] == \
        ["sum up hello"]
    assert "How long?" in task.source and "| Steps | 3 |" in task.source
    assert "| LLM calls | 4 |" in task.source and f"| Model | `{res.model}` |" in task.source
    assert setup.source == "context = 'hello world'" and setup.execution_count is None
    assert setup.outputs == []
    assert s1.source == "# First, measure.\n#\n# Then look.\nn = len(context)\nprint(n)"
    assert s1.outputs[0].output_type == "stream" and s1.outputs[0].name == "stdout"
    assert s1.outputs[0].text.strip() == "11"
    assert s2.source.startswith("# Thinking.\nsummary = llm_query(")
    assert s2.outputs[0].text.strip() == "sub:sum up hello"
    assert s3.source == "# Done.\nFINAL(f'{n} chars: {summary}')"
    assert all(c.execution_count is None for c in (s1, s2, s3))
    assert answer.cell_type == "markdown"
    assert answer.source == "**Answer:** 11 chars: sub:sum up hello\n\n*The answer was " \
        "computed by the model's code from your data.*"


def test_notebook_metadata_totals_equal_the_result():
    res = run()
    nb = export_run(res, run_id="r2")
    meta = nb.metadata
    assert meta.kernelspec == {"name": "rlm", "display_name": "RLM (Python)",
                               "language": "python"}
    assert meta.language_info == language_info()  # the kernel's whole record
    assert set(meta.language_info) == {"name", "version", "mimetype", "file_extension",
                                       "pygments_lexer", "codemirror_mode",
                                       "nbconvert_exporter"}
    m = meta.rlm
    assert m.run_id == "r2" and m.question == "How long?"
    assert m.model == res.model and m.sub_model == res.sub_model
    assert m.stopped_by == "final" and m.answer == res.answer and m.error is None
    assert (m.steps, m.llm_calls) == (res.steps, res.llm_calls) == (3, 4)
    assert m.prompt_tokens == res.prompt_tokens == 40
    assert m.completion_tokens == res.completion_tokens == 20
    assert m.cost_usd == pytest.approx(res.cost_usd) and m.cost_usd == pytest.approx(0.008)
    assert m.seconds == res.seconds
    assert m.step_seconds == [e.execution_time for e in res.history]
    assert m.calls == [c.to_dict() for c in res.calls]
    assert [c["role"] for c in m.calls] == ["root", "root", "sub", "root"]
    json.dumps(dict(meta))  # JSON-safe


def test_kernel_outputs_and_execution_counts_are_used():
    res = run()
    given = [[{"output_type": "stream", "name": "stdout", "text": "11\n"}],
             None,
             [{"output_type": "execute_result", "execution_count": 9, "metadata": {},
               "data": {"text/plain": "'done'"}}]]
    nb = export_run(res, step_outputs=given, execution_counts=[7, 8, 9])
    steps = [c for c in nb.cells if c.metadata["rlm"]["role"] == "step"]
    assert [c.execution_count for c in steps] == [7, 8, 9]
    assert steps[0].outputs == given[0]
    assert steps[1].outputs[0].text.strip() == "sub:sum up hello"  # fallback: entry.output
    assert steps[2].outputs[0].data == {"text/plain": "'done'"}
    assert len({c.id for c in nb.cells}) == len(nb.cells)


def test_invalid_kernel_output_is_rejected():
    with pytest.raises(nbformat.ValidationError):
        export_run(run(), step_outputs=[[{"output_type": "stream", "name": "stdout"}]])


def test_no_answer_shows_the_stop_reason():
    res = run([block("x = 1"), block("x = 2")], max_iterations=1)
    assert res.stopped_by == "max_iterations"
    nb = export_run(res)
    assert "max_iterations" in nb.cells[-1].source
    assert res.answer is None  # the "answer now" reply called no FINAL: no answer
    assert nb.cells[-1].source.startswith("**No answer: the run reached its step limit.**")
    step = next(c for c in nb.cells if c.metadata.rlm["role"] == "step")
    assert step.source == "# Thinking.\nx = 1" and step.outputs == []  # empty output omitted
    res.answer, res.stopped_by, res.error = None, "error", "boom | bad"
    last = export_run(res).cells[-1].source
    assert last.startswith("**No answer: the run failed.**") and "`error`" in last and "boom | bad" in last


def test_multiline_answer_is_fenced():
    nb = export_run(run([block("FINAL('a\\nb ``` c')")], context="a\nb ``` c"))
    assert nb.cells[-1].source.startswith("**Answer:**\n\n````text\na\nb ``` c\n````\n\n")


def test_write_validates_creates_folders_and_requires_ipynb(tmp_path):
    res = run()
    out = tmp_path / "deep" / "er" / "run.ipynb"
    nb = export_run(res, out, run_id="w")
    back = nbformat.read(out, as_version=4)
    nbformat.validate(back)
    assert back == nb
    for bad in (tmp_path / "run.json", tmp_path / "run", "run.ipynb.txt"):
        with pytest.raises(ValueError, match=r"must end with \.ipynb"):
            export_run(res, bad)
    assert not (tmp_path / "run.json").exists()


def test_cli_setup_cells_use_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("A")
    assert cli_setup_cells([]) == []
    [cell] = cli_setup_cells(["a.txt"])
    assert cell == ("from rlm_kernel.context import load_contexts\n\n"
                    f"context = load_contexts([{str(tmp_path / 'a.txt')!r}])")
    ns: dict = {}
    exec(cell, ns)
    assert ns["context"] == "A"


def _tools_namespace(sub: ScriptedModel) -> dict:
    """A namespace with the reserved functions, as the rlm kernel provides outside runs."""
    ns: dict = {}
    ledger = UsageLedger()
    sub.ledger = ledger
    guard = BudgetGuard(Budget(None, None, None, None), ledger, time.monotonic())
    tools = REPLFunctions(sub, guard, ns, depth=0, max_concurrency=2)
    ns.update(tools.functions())
    return ns


def test_exported_notebook_reruns_in_order(tmp_path):
    data = tmp_path / "data.txt"
    data.write_text("hello world")
    res = run(context=data.read_text())
    nb = export_run(res, setup_cells=cli_setup_cells([str(data)]))
    ns = _tools_namespace(ScriptedModel([]))
    code = [c for c in nb.cells if c.cell_type == "code" and c.metadata.rlm["role"] != "recorded"]
    for cell in code[:-1]:
        exec(compile(cell.source, "<cell>", "exec"), ns)
    assert ns["context"] == "hello world" and ns["n"] == 11
    assert ns["summary"] == "sub:sum up hello"  # the sub model was called again
    with pytest.raises(FinalOutput) as final:
        exec(compile(code[-1].source, "<cell>", "exec"), ns)
    assert final.value.output["answer"] == res.answer


@pytest.fixture
def scripted_cli(monkeypatch):
    """``make_client`` in the engine returns a scripted model instead of litellm."""
    made = []

    def fake_make_client(model, **kwargs):
        made.append(model)
        return ScriptedModel(list(STEPS), model=model, cost_usd=0.001)

    monkeypatch.setattr(rlm_kernel.engine.rlm, "make_client", fake_make_client)
    return made


def test_cli_export_writes_a_rerunnable_notebook(tmp_path, monkeypatch, capsys, scripted_cli):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "book.txt").write_text("hello world")
    code = main(["run", "--context", "book.txt", "--model", "scripted/m",
                 "--export", "out/run.ipynb", "How long?"])
    assert code == 0, capsys.readouterr().err
    assert scripted_cli == ["scripted/m"]
    assert "Notebook: out/run.ipynb" in capsys.readouterr().out
    nb = nbformat.read(tmp_path / "out" / "run.ipynb", as_version=4)
    nbformat.validate(nb)
    assert roles(nb) == ["task", "setup", "recorded", "step", "step", "step", "answer"]
    assert repr(str(tmp_path / "book.txt")) in nb.cells[1].source
    assert nb.metadata.rlm.model == "scripted/m" and nb.metadata.kernelspec.name == "rlm"
    assert nb.metadata.rlm.answer == "11 chars: sub:sum up hello"


def test_cli_json_names_the_export(tmp_path, capsys, scripted_cli):
    f = tmp_path / "a.txt"
    f.write_text("hello world")
    out = tmp_path / "r.ipynb"
    code = main(["run", "--context", str(f), "--model", "scripted/m", "--json",
                 "--export", str(out), "q"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["export"] == str(out) and out.exists()
    assert data["llm_calls"] == nbformat.read(out, as_version=4).metadata.rlm.llm_calls


def test_cli_export_errors(tmp_path, capsys, scripted_cli):
    f = tmp_path / "a.txt"
    f.write_text("hello world")
    code = main(["run", "--context", str(f), "--model", "scripted/m",
                 "--export", str(tmp_path / "run.txt"), "q"])
    assert code == 2 and scripted_cli == []  # refused before the run
    assert capsys.readouterr().err.startswith("rlm: error: --export needs a path ending in")
    blocker = tmp_path / "file"
    blocker.write_text("")
    code = main(["run", "--context", str(f), "--model", "scripted/m", "--json",
                 "--export", str(blocker / "run.ipynb"), "q"])
    captured = capsys.readouterr()
    assert code == 1
    assert "export" not in json.loads(captured.out)
    assert captured.err.startswith(f"rlm: error: cannot write {blocker / 'run.ipynb'}")
    assert len(captured.err.strip().splitlines()) == 1


def test_setup_cell_keeps_relative_keys_of_several_paths(tmp_path, monkeypatch):
    from rlm_kernel.export import cli_setup_cells

    (tmp_path / "a.txt").write_text("A")
    (tmp_path / "b.txt").write_text("B")
    monkeypatch.chdir(tmp_path)
    (cell,) = cli_setup_cells(["a.txt", "b.txt"])
    monkeypatch.chdir("/")
    ns: dict = {}
    exec(cell, ns)
    assert ns["context"] == {"a.txt": "A", "b.txt": "B"}
