"""RLM runs in a real JupyterLab in a real browser (Debian's Chromium via Playwright).

A module fixture starts ``jupyter lab``; each test writes a notebook that loads the
interpreter's ``json`` package as ``context`` and asks which file defines a function
(the question and its answer come from :func:`evals.questions.defines_function_question`),
runs all cells from the command palette, and watches the page.

With the JupyterLab extension (``rlm-kernel-labextension``) installed, each step must
appear as a real code cell below the task cell *while the task cell still shows*
``[*]``, get its execution count and outputs, an answer markdown cell must follow, and
the saved ``.ipynb`` must hold the step cells (outputs, ``metadata.rlm``) and the answer.
Without it, the harness checks plain JupyterLab (the notebook opens, the cells run, the
task cell's result is the answer: the kernel's inline fallback) and then fails, naming
what did not run.

A last test runs two task cells on scripted replies (no model) and checks what outlives
the kernel: the runs' views turn into static HTML, the saved notebook holds no widget
view and, reopened after its kernel was shut down, shows the runs' summaries and no
"Error displaying widget"; the toolbar's export writes the selected task cell's run, and
the exported notebook opens unmodified.

The last test checks every view of a run (no data, running, finished, stuck, isolated
with its traceback, a failed start, candidates) on scripted replies, in a few seconds.

Every view checked is saved as a screenshot in ``$RLM_SCREENSHOTS``, else
``build/screenshots/`` (git-ignored). Needs ``scripts/install_browser.sh`` and
``pip install playwright "jupyterlab>=4.6,<4.7"``.
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.sign import NotebookNotary

from evals.questions import defines_function_question
from rlm_kernel.engine.answer.sources import TONES
from rlm_kernel.engine.result import ANSWER_SOURCES
from tests.lab_harness import (
    EXTENSION_NAME,
    LOAD_JSON_CELL,
    JupyterLab,
    NotebookPage,
    chromium_page,
    dumps,
    extension_installed,
    is_running,
    missing_prerequisites,
    prompt_count,
    write_notebook,
)
from tests.replies import block
from tests.scripted import SCRIPTED_SETTINGS

_MISSING = missing_prerequisites()
pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _prerequisites() -> None:
    """`make setup` installs Chromium, Playwright and the extension: their absence is
    a failed set-up, never a skip."""
    if _MISSING:
        pytest.fail(f"browser test needs: {', '.join(_MISSING)} (run `make setup`)")

RUN_TIMEOUT = 600.0  # seconds for the whole task on the local model
ANSWER_TIMEOUT = 30.0  # seconds for the answer cell after the task cell finished


@pytest.fixture(scope="module")
def question():
    """The question and its expected answer, computed from the stdlib with ast."""
    return defines_function_question("json", random.Random(0))


@pytest.fixture(scope="module")
def lab(local_server):
    """A real ``jupyter lab`` for this module; kernels reuse the model server."""
    with JupyterLab() as server:
        yield server


@pytest.fixture(scope="module")
def extension() -> bool:
    """Whether ``jupyter labextension list`` shows the RLM extension."""
    return extension_installed()


@pytest.fixture()
def page(tmp_path):
    """A Chromium page in a persistent context with a fresh user-data-dir."""
    with chromium_page(tmp_path / "chromium-profile") as page:
        yield page


def expected_name(question) -> str:
    """The file name the answer must contain (``encoder.py`` for seed 0)."""
    return Path(question.expected).name


def result_text(cell: dict[str, Any]) -> str:
    """The text/plain of a cell's execute_result outputs."""
    parts = []
    for out in cell["outputs"]:
        if out.get("output_type") == "execute_result":
            text = out.get("data", {}).get("text/plain", "")
            parts.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(parts)


def error_outputs(cell: dict[str, Any]) -> list[dict[str, Any]]:
    """The error outputs of a cell."""
    return [o for o in cell["outputs"] if o.get("output_type") == "error"]


def run_and_watch(nb: NotebookPage, task_index: int, label: str,
                  extension: bool) -> dict[str, Any]:
    """Run all cells; wait for the task cell to finish; screenshot mid-run and finished.

    Returns the task cell id, the page's RLM cell events, the final cells, the
    screenshot paths and whether the task cell was seen running.
    """
    cells = nb.cells()
    task_id = cells[task_index]["id"]
    nb.watch_rlm_cells(task_id)
    nb.run_all()
    shots: list[Path] = []
    seen_running = False
    writing: list[tuple[int, int]] = []  # (step, characters) of a cell being written
    deadline = time.monotonic() + RUN_TIMEOUT
    while True:
        cells = nb.cells()
        task = cells[[c["id"] for c in cells].index(task_id)]
        if is_running(task["prompt"]):
            seen_running = True
            written = [c for c in cells if (c["rlm"] or {}).get("writing")]
            for c in written:
                writing.append((c["rlm"]["step"], len(c["source"])))
            if written and len(writing) >= 3 and not any("writing" in str(p) for p in shots):
                shots.append(nb.screenshot(f"browser_{label}_writing"))  # mid-reply
            # Mid-run: with the extension, once a step cell exists; without it, once the
            # task cell shows something (the inline fallback or progress).
            ready = (any((c["rlm"] or {}).get("role") == "step" for c in cells) if extension
                     else bool(task["outputs"]))
            if ready and not shots:
                shots.append(nb.screenshot(f"browser_{label}_midrun"))
        if prompt_count(task["prompt"]) is not None:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"task cell not finished after {RUN_TIMEOUT} s: "
                                 f"{nb.summary()}")
        nb.page.wait_for_timeout(200)
    if extension:
        nb.wait_for(lambda: any((c["rlm"] or {}).get("role") == "answer" for c in nb.cells()),
                    ANSWER_TIMEOUT, "the answer cell")
    nb.page.wait_for_timeout(500)  # let the last outputs render before the screenshot
    shots.append(nb.screenshot(f"browser_{label}_finished"))
    return {"task_id": task_id, "events": nb.rlm_events(), "cells": nb.cells(),
            "screenshots": shots, "seen_running": seen_running, "writing": writing}


def check_page(run: dict[str, Any], task_index: int, expected: str,
               kernel: str = "rlm") -> list[dict[str, Any]]:
    """Extension assertions on the live page; returns the step cells in order."""
    cells, task_id, events = run["cells"], run["task_id"], run["events"]
    task = cells[task_index]
    assert task["id"] == task_id, "the task cell moved"
    step_events = [e for e in events if e["role"] == "step"]
    assert step_events, f"no step cell appeared: {dumps(events)}"
    # The point of the extension: steps become cells while the task cell is running.
    for e in step_events:
        assert is_running(e["taskPrompt"] or ""), (
            f"step {e['step']} cell appeared when the task prompt was "
            f"{e['taskPrompt']!r}, not [*]: {dumps(step_events)}")
        assert e["task_cell"] == task_id, dumps(e)
        assert e["inDom"], f"step {e['step']} cell not in the DOM when it appeared"
    steps = [c for c in cells if (c["rlm"] or {}).get("role") == "step"]
    run_ids = {c["rlm"]["run_id"] for c in steps}
    assert len(run_ids) == 1, f"steps of several runs: {run_ids}"
    # Directly below the task cell, in step order, each a code cell with a count.
    assert [c["index"] for c in steps] == list(range(task_index + 1,
                                                     task_index + 1 + len(steps)))
    assert [c["rlm"]["step"] for c in steps] == list(range(1, len(steps) + 1))
    for c in steps:
        assert c["type"] == "code"
        assert c["rlm"]["task_cell"] == task_id
        count = prompt_count(c["prompt"])
        if kernel == "rlm":
            assert count is not None and count == c["execution_count"], (c["prompt"], c)
        else:  # a python3 kernel's steps take no count (shell_executor.numbers_steps)
            assert count is None and c["execution_count"] is None, (c["prompt"], c)
    task_count = prompt_count(task["prompt"])
    # the RLM kernel's task cell keeps its own count (RLMKernel.do_execute), its steps
    # have the next ones; in a python3 kernel with %load_ext the steps take none, so the
    # task cell's count follows the cell above it
    assert task_count is not None, task["prompt"]
    if kernel == "rlm":
        counts = [c["execution_count"] for c in steps]
        assert counts == sorted(set(counts)), f"step counts not increasing: {counts}"
        assert task_count < min(counts), (kernel, task_count, counts)
    else:
        above = prompt_count(cells[task_index - 1]["prompt"])
        assert above is not None and task_count == above + 1, (kernel, above, task_count)
    assert any(c["outputs"] for c in steps), "no step cell has outputs"
    answers = [c for c in cells if (c["rlm"] or {}).get("role") == "answer"]
    assert len(answers) == 1, [c["rlm"] for c in answers]
    answer = answers[0]
    assert answer["type"] == "markdown"
    assert answer["index"] == steps[-1]["index"] + 1, "answer cell not below the last step"
    assert answer["rlm"]["run_id"] in run_ids
    assert expected in answer["text"] or expected in answer["source"], answer
    return steps


def check_saved(path: Path, task_index: int, steps: list[dict[str, Any]],
                expected: str) -> None:
    """The saved .ipynb holds the step cells with outputs and metadata, and the answer."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    task_id = nb.cells[task_index].id
    saved = [c for c in nb.cells if c.metadata.get("rlm", {}).get("role") == "step"]
    assert len(saved) == len(steps)
    for cell, live in zip(saved, steps, strict=True):
        rlm = cell.metadata["rlm"]
        assert set(rlm) >= {"run_id", "step", "role", "task_cell"}, rlm
        assert rlm["task_cell"] == task_id and rlm["step"] == live["rlm"]["step"]
        assert cell.cell_type == "code" and cell.execution_count == live["execution_count"]
        assert cell.source == live["source"]
    assert any(cell.outputs for cell in saved), "no saved step cell has outputs"
    answers = [c for c in nb.cells if c.metadata.get("rlm", {}).get("role") == "answer"]
    assert len(answers) == 1 and answers[0].cell_type == "markdown"
    assert expected in answers[0].source


def run_notebook_test(lab: JupyterLab, page: Any, extension: bool, question, *,
                      name: str, kernel: str, display: str, cells: list[str],
                      label: str) -> None:
    """The whole browser scenario for one notebook; see the module docstring."""
    task_index = len(cells) - 1
    expected = expected_name(question)
    write_notebook(lab.root / name, kernel, display, cells)
    nb = NotebookPage(page, lab, name).open()
    assert nb.kernel()["name"] == kernel
    assert [c["source"] for c in nb.cells()] == cells

    run = run_and_watch(nb, task_index, label, extension)
    final = run["cells"]
    assert run["seen_running"], "never saw the task cell's [*] prompt"
    for c in final[:task_index]:
        assert prompt_count(c["prompt"]) is not None, f"setup cell did not run: {c}"
        assert not error_outputs(c), f"setup cell failed: {error_outputs(c)}"
    task = final[task_index]
    assert not error_outputs(task), error_outputs(task)
    # The task cell's result is the answer, with or without the extension.
    assert expected in result_text(task), f"answer {result_text(task)!r}, expected {expected}"

    if not extension:
        saved = nbformat.read(nb.save(), as_version=4)
        nbformat.validate(saved)
        assert saved.cells[task_index].execution_count == prompt_count(task["prompt"])
        assert expected in result_text(saved.cells[task_index])
        pytest.fail(f"{EXTENSION_NAME} is not installed: plain JupyterLab checks passed "
                    f"(inline fallback, answer {result_text(task)!r}); the step-cell, "
                    "answer-cell and saved-notebook assertions did not run")
    steps = check_page(run, task_index, expected, kernel)
    # a step cell filled while the model wrote its reply (streamed), then became the step
    grew = [step for step in {s for s, _ in run["writing"]}
            if len({n for s, n in run["writing"] if s == step}) >= 2]
    assert grew, f"no step cell was seen filling while the model wrote: {run['writing']}"
    assert not any(c["rlm"].get("writing") for c in steps), "a step cell still says writing"
    assert any("writing" in str(p) for p in run["screenshots"])
    path = nb.save()
    check_saved(path, task_index, steps, expected)


def test_rlm_kernel_prose_task(lab, page, extension, question):
    """The `rlm` kernel: a prose cell is the task; its steps become cells below it."""
    run_notebook_test(lab, page, extension, question, name="rlm_prose.ipynb",
                      kernel="rlm", display="RLM (Python)",
                      cells=[LOAD_JSON_CELL, question.text], label="rlm")


def test_python3_magic_task(lab, page, extension, question):
    """A `python3` kernel with `%load_ext rlm_kernel` and a `%%rlm` cell."""
    run_notebook_test(lab, page, extension, question, name="magic.ipynb",
                      kernel="python3", display="Python 3",
                      cells=["%load_ext rlm_kernel", LOAD_JSON_CELL,
                             f"%%rlm --context context\n{question.text}"],
                      label="magic")


def _sample_status(nb: NotebookPage, done: Any, timeout: float, what: str) -> list[str]:
    """The status bar's kernel state, every 0.3 s, until ``done()``."""
    states, deadline = [], time.monotonic() + timeout
    while not done():
        text = nb.status_text()
        states.append("Busy" if "Busy" in text else "Idle" if "Idle" in text else text[:40])
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {nb.summary()}")
        nb.page.wait_for_timeout(300)
    return states


EDIT = "\nedits = globals().get('edits', 0) + 1\nprint('edited step')"
COUNT_EDITS = "print('edits', globals().get('edits', 0))"


def test_continue_from_an_edited_step_then_run_all(lab, page, extension, question):
    """The status bar reads Busy while a run goes; a step cell edited and continued
    from ("Continue RLM run from this step") replaces the steps from there and the
    answer cell; "Run All" afterwards re-runs the task without executing the old
    step cells as plain code (the edit's counter stays at 1)."""
    if not extension:
        pytest.fail(f"{EXTENSION_NAME} is not installed")
    write_notebook(lab.root / "continue.ipynb", "rlm", "RLM (Python)",
                   [LOAD_JSON_CELL, question.text, COUNT_EDITS])
    nb = NotebookPage(page, lab, "continue.ipynb").open()
    task_id = nb.cells()[1]["id"]

    def answers() -> list[dict[str, Any]]:
        return [c for c in nb.cells() if (c["rlm"] or {}).get("role") == "answer"]

    nb.run_all()
    # "Run All" marks every queued cell running at once, and the kernel is Idle for a
    # moment between the data cell's reply and the task's request: sample from the
    # task's first step cell on, when the task is surely the request being executed
    nb.wait_for(lambda: any((c["rlm"] or {}).get("task_cell") == task_id
                            for c in nb.cells()), RUN_TIMEOUT, "the task's first step cell")
    states = _sample_status(nb, lambda: prompt_count(nb.cells()[1]["prompt"]) is not None,
                            RUN_TIMEOUT, "the first run")
    assert states and states[:-1].count("Idle") == 0, f"status during the run: {states}"
    nb.wait_for(answers, ANSWER_TIMEOUT, "the first answer cell")
    first = answers()[0]["rlm"]["run_id"]
    step1 = next(c for c in nb.cells() if (c["rlm"] or {}).get("role") == "step")
    assert step1["rlm"]["exchanges"][0]["role"] == "root", step1["rlm"]  # the record
    nb.edit_cell(step1["index"], step1["source"] + EDIT)
    nb.palette("Continue RLM run from this step")

    def continued() -> bool:
        return any(c["rlm"]["run_id"] != first for c in answers())

    states = _sample_status(nb, continued, RUN_TIMEOUT, "the continued run's answer")
    assert states.count("Busy") >= max(1, len(states) - 2), f"status while continuing: {states}"
    cells = nb.cells()
    runs = {(c["rlm"] or {}).get("run_id") for c in cells if (c["rlm"] or {}).get("role")}
    assert first not in runs, "the old run's steps and answer were not replaced"
    steps = [c for c in cells if (c["rlm"] or {}).get("role") == "step"]
    assert steps[0]["index"] == 2 and steps[0]["rlm"]["task_cell"] == task_id
    assert "edited step" in "".join(str(o.get("text", "")) for o in steps[0]["outputs"])
    assert len(answers()) == 1

    nb.run_all()
    nb.wait_for(lambda: is_running(nb.cells()[1]["prompt"]), 60, "the re-run to start")
    nb.wait_for(lambda: prompt_count(nb.cells()[1]["prompt"]) is not None, RUN_TIMEOUT,
                "the re-run")
    nb.wait_for(lambda: any("edits" in str(o.get("text", "")) for o in nb.cells()[-1]["outputs"])
                and prompt_count(nb.cells()[-1]["prompt"]) is not None, 120, "the last cell")
    printed = "".join(str(o.get("text", "")) for o in nb.cells()[-1]["outputs"])
    assert "edits 1" in printed, f"old step cells ran again as plain code: {printed!r}"
    assert len(answers()) == 1


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_ERROR = "Error displaying widget"
SCRIPTED_DATA = "context = 'hello world'\nhits = ['x' * 100, 'y' * 100]"


def _text_of(page: Any, selector: str = ".jp-Notebook") -> str:
    """The rendered text of the first element matching ``selector``."""
    return page.evaluate("(s) => (document.querySelector(s) || {}).innerText || ''", selector)


def _trusted(nb: NotebookPage) -> list[bool]:
    """Whether each ``%%rlm`` task cell of the open notebook is trusted."""
    return nb.page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets
        .filter(c => c.model.sharedModel.getSource().startsWith('%%rlm'))
        .map(c => c.model.trusted)""")


def test_a_saved_notebook_reads_well_after_the_kernel_is_gone(lab, page, extension):
    """Two task cells run (scripted replies: the views and the export are under test,
    not the model).  When each run ends its progress and variables views give way to
    static HTML; the saved notebook holds no widget view; reopened with its kernel shut
    down it shows no widget error and the run's summary.  The toolbar's export with the
    first task cell selected writes that cell's run, not the latest; the exported
    notebook opens unmodified (its metadata is the kernel's)."""
    if not extension:
        pytest.fail(f"{EXTENSION_NAME} is not installed")
    replies = [block("n = len(hits)\nprint(n)"), block("FINAL(n)"), block("FINAL('b')")]
    cells = [_script_cell(replies, max_iterations=4), SCRIPTED_DATA,
             "%%rlm\nHow many hits are there?", "%%rlm\nSay b."]
    write_notebook(lab.root / "static.ipynb", "rlm", "RLM (Python)", cells)
    nb = NotebookPage(page, lab, "static.ipynb").open()
    task_ids = [c["id"] for c in nb.cells()[2:4]]
    nb.run_all()

    def answers() -> dict[str, str]:
        return {(c["rlm"] or {}).get("task_cell"): c["rlm"]["run_id"] for c in nb.cells()
                if (c["rlm"] or {}).get("role") == "answer"}

    nb.wait_for(lambda: len(answers()) == 2, 120, "both answer cells")
    runs = answers()

    def task_cells() -> list[dict[str, Any]]:
        return [c for c in nb.cells() if c["id"] in task_ids]

    nb.wait_for(lambda: all(prompt_count(c["prompt"]) is not None for c in task_cells()),
                60, "both task cells to finish")
    nb.page.wait_for_timeout(1000)  # the last display updates
    for cell in task_cells():
        kinds = [set(o.get("data", {})) for o in cell["outputs"]
                 if o["output_type"] == "display_data"]
        assert kinds and all(WIDGET_VIEW not in k for k in kinds), (cell["source"], kinds)
        assert all({"text/html", "text/plain"} <= k for k in kinds), kinds
    first = task_cells()[0]["text"]
    assert "2 steps, final" in first and "step 2 of 4" not in first, first
    assert re.search(r"hits\s+list\s+2 items", first), first
    assert "1 step, final" in task_cells()[1]["text"]
    saved = nbformat.read(nb.save(), as_version=4)
    outputs = [o for c in saved.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if WIDGET_VIEW in o.get("data", {})]

    # The toolbar's export, the first task cell selected: its run, not the latest one.
    nb.select_cell([c["id"] for c in nb.cells()].index(task_ids[0]))
    nb.palette("RLM export")
    exported = lab.root / f"static-rlm-{runs[task_ids[0]]}.ipynb"
    nb.wait_for(exported.exists, 60, f"{exported.name} (the selected cell's run)")
    assert not (lab.root / f"static-rlm-{runs[task_ids[1]]}.ipynb").exists()
    meta = nbformat.read(exported, as_version=4).metadata
    assert meta["rlm"]["question"] == "How many hits are there?"

    # Reopened with its kernel shut down: no widget error, the static summary.
    nb.shutdown_kernel()
    nb.page.goto("about:blank")
    reopened = NotebookPage(page, lab, "static.ipynb").open()
    reopened.page.wait_for_timeout(3000)  # let any widget renderer give up
    text = _text_of(reopened.page)
    shot = reopened.screenshot("browser_static_reopened")
    assert WIDGET_ERROR not in text, f"{shot}: {text[:2000]}"
    assert "2 steps, final" in text and "1 step, final" in text, text[:2000]
    assert "Variables the model sees" in text and "completion tokens" in text
    assert re.search(r"hits\s+list\s+2 items", text), text[:2000]
    # Trusted, as the user left it: a widget view saved in it would be rendered (and
    # fail), not shown as plain text.  The control: the same notebook with a live view
    # saved in its first task cell shows the error.
    assert _trusted(reopened) == [True, True], _trusted(reopened)
    control = nbformat.read(lab.root / "static.ipynb", as_version=4)
    control.cells[2].outputs.insert(0, nbformat.v4.new_output(
        "display_data", data={WIDGET_VIEW: {"model_id": "0" * 32, "version_major": 2,
                                            "version_minor": 0}, "text/plain": "HTML()"}))
    NotebookNotary().sign(control)
    (lab.root / "control.ipynb").write_text(nbformat.writes(control), encoding="utf-8")
    reopened.shutdown_kernel()
    shown = NotebookPage(page, lab, "control.ipynb").open()
    shown.wait_for(lambda: WIDGET_ERROR in _text_of(page), 30, "the control's widget error")
    shown.shutdown_kernel()

    # The exported notebook opens unmodified; one with a partial language_info would not.
    opened = NotebookPage(page, lab, exported.name).open()
    opened.page.wait_for_timeout(2000)  # kernel info and spec applied to the model
    assert (opened.kernel() or {}).get("dirty") is False, opened.kernel()
    partial = nbformat.read(exported, as_version=4)
    partial.metadata["language_info"] = {"name": "python"}
    (lab.root / "partial.ipynb").write_text(nbformat.writes(partial), encoding="utf-8")
    opened = NotebookPage(page, lab, "partial.ipynb").open()
    opened.wait_for(lambda: (opened.kernel() or {}).get("dirty") is True, 30,
                    "the partial notebook to be marked modified (the control)")


def _names_bound(sources: list[str]) -> set[str]:
    """Names assigned at top level of the given step sources (with ast)."""
    import ast

    names: set[str] = set()
    for src in sources:
        try:
            tree = ast.parse(src)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return names


def _names_read(source: str) -> set[str]:
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)}


def test_a_follow_up_task_uses_the_previous_tasks_variables(lab, page, extension, question):
    """Two prose tasks in the `rlm` kernel on the embedded model: the second ("that
    file") is told the first, and its step cells, below it, read a variable that the
    first task's steps made; the second run's export starts with the first task's code."""
    if not extension:
        pytest.fail(f"{EXTENSION_NAME} is not installed")
    follow_up = "How many lines does that file have?"
    cells = [LOAD_JSON_CELL, question.text, follow_up]
    write_notebook(lab.root / "followup.ipynb", "rlm", "RLM (Python)", cells)
    nb = NotebookPage(page, lab, "followup.ipynb").open()
    task_ids = [c["id"] for c in nb.cells()[1:3]]
    nb.run_all()

    def answers() -> dict[str, dict[str, Any]]:
        return {(c["rlm"] or {}).get("task_cell"): c for c in nb.cells()
                if (c["rlm"] or {}).get("role") == "answer"}

    nb.wait_for(lambda: set(answers()) >= set(task_ids), RUN_TIMEOUT, "both answer cells")
    cells_now = nb.cells()
    shot = nb.screenshot("browser_followup_finished")

    def steps_of(task_id: str) -> list[dict[str, Any]]:
        return [c for c in cells_now if (c["rlm"] or {}).get("role") == "step"
                and c["rlm"]["task_cell"] == task_id]

    first, second = steps_of(task_ids[0]), steps_of(task_ids[1])
    assert first and second, f"{shot}: {nb.summary()}"
    assert expected_name(question) in answers()[task_ids[0]]["text"]
    # the follow-up's steps sit below its own task cell
    follow_index = [c["id"] for c in cells_now].index(task_ids[1])
    assert [c["index"] for c in second] == list(range(follow_index + 1,
                                                      follow_index + 1 + len(second)))
    left = _names_bound([c["source"] for c in first]) - {"context"}
    read = set().union(*(_names_read(c["source"]) for c in second))
    assert left & read, (f"{shot}: the follow-up's steps read none of {sorted(left)}: "
                         f"{[c['source'] for c in second]}")
    # the toolbar's export of the follow-up re-creates the first task's variables first
    run_id = answers()[task_ids[1]]["rlm"]["run_id"]
    nb.select_cell(follow_index)
    nb.palette("RLM export")
    exported = lab.root / f"followup-rlm-{run_id}.ipynb"
    nb.wait_for(exported.exists, 60, f"{exported.name} (the follow-up's run)")
    sources = [c.source for c in nbformat.read(exported, as_version=4).cells]
    assert any(src.startswith("# earlier task 1: Which file defines") for src in sources), \
        sources


_SESSION = "get_ipython().magics_manager.registry['RLMMagics'].session"
"""The kernel's ``%rlm`` session (:class:`~rlm_kernel.jupyter.session.NotebookSession`),
as code run in the kernel."""


# -- the views of issue 26, each checked and saved as a screenshot -------------------------
def _script_cell(replies: list[str] | str, **config: Any) -> str:
    """A cell that scripts the model for the next task (a fresh reply queue): a
    :class:`~rlm_kernel.models.scripted.ScriptedModel` of ``replies`` (a list of
    replies, or the code of one) as every client the
    kernel's ``%rlm`` session makes (its ``client_factory``, the seam the in-process
    tests use), the settings of every scripted run (:data:`tests.scripted.SCRIPTED_SETTINGS`),
    then ``c.RLM.<key> = value`` for each of ``config``."""
    code = replies if isinstance(replies, str) else repr(replies)
    lines = ["from rlm_kernel.models.scripted import ScriptedModel as _S",
             "from rlm_kernel.models import LLMError",
             f"_lm = _S({code})",
             f"{_SESSION}.client_factory = lambda model: _lm"]
    lines += [f"get_ipython().run_line_magic('config', {f'RLM.{k} = {v!r}'!r})"
              for k, v in {**SCRIPTED_SETTINGS, **config}.items()]
    return "\n".join(lines)


VIEW_REPLIES = {
    "no_data": [block("FINAL('hello to you')")],
    "running": [block("import time\nwords = context.split()\ntime.sleep(6)\nprint(len(words))"),
                block("FINAL(len(words))")],
    "stuck": [block("print(undefined_name)")] * 3 + [block("FINAL('no idea')")],
    "isolated": [block("def f(x):\n    return x / 0\nprint('made f')"), block("y = 1\nf(y)"),
                 block("FINAL(len(context))")],
    "candidates": [block("x = 41\nFINAL_VAR('x')"), block("x = len(context)\nFINAL_VAR('x')"),
                   block("x = len(context)\nFINAL_VAR('x')")],
    # the provider fails at the second call: a run that failed without an answer
    "failed": f"[{block('n = len(context.split())')!r}, LLMError('the provider is down')]",
    # a step that waits until the test presses stop
    "interrupted": [block("import time\nfor _ in range(600):\n    time.sleep(0.1)"),
                    block("FINAL('too late')")],
}
VIEW_TASKS = {
    "no_data": "What's the greeting? Say hello.",  # a prose task cell
    "running": "%%rlm\nHow many words are there?",
    "stuck": "%%rlm\nPrint the undefined name.",
    "isolated": "%%rlm --isolated\nDivide by zero.",
    # a prose task cell whose run never starts (no API key): no run_started says prose
    "error": "How long is the context, asked of a model with no key?",
    "candidates": "%%rlm --candidates 3\nHow long is the context?",
    "failed": "%%rlm\nCount the words, then ask again.",
    "interrupted": "How many words are there, counted slowly?",  # a prose task cell
}
ENDINGS = {
    # view: (the tone the answer cell must take, words it must show)
    "running": ("ok", "from your data"),
    "no_data": ("caution", "reached without"),
    "stuck": ("caution", "repeated itself"),
    "candidates": ("caution", "vote"),
    "failed": ("error", "failed"),
    "interrupted": ("caution", "interrupted"),
}
"""How each ending with an answer cell is shown: its tone (rlm_kernel/engine/answer/
sources.py ``TONES``; a run without an answer is never ``ok``) and words of its
``ending_words``."""
RESTORE_MODEL = ("import os\nos.environ.pop('OPENAI_API_KEY', None)\n"
                 f"{_SESSION}.client_factory = None\n"  # the engine's own litellm clients
                 "get_ipython().run_line_magic('config', \"RLM.model = 'openai/gpt-4o-mini'\")")


def _rgb(colour: str) -> str:
    """``#4caf50`` as a browser's computed style writes it: ``rgb(76, 175, 80)``."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgb({r}, {g}, {b})"


@pytest.fixture()
def scripted_lab():
    """A real ``jupyter lab`` for a scripted notebook (no model server)."""
    with JupyterLab() as server:
        yield server


def test_every_view_of_a_run_is_checked_and_saved(scripted_lab, page, extension):
    """The views of a run in the `rlm` kernel with the extension, on scripted replies (the
    views are under test, not the model), each saved as a screenshot: a task with no
    data, a task running and finished, a stuck run, an isolated run whose steps have
    execution counts and an IPython-formatted traceback, a failed start (a missing API
    key) that leaves no progress block, and a candidates run's one summary."""
    if not extension:
        pytest.fail(f"{EXTENSION_NAME} is not installed")
    cells: list[str] = []
    task_at: dict[str, int] = {}
    for view in ("no_data", "running", "stuck", "isolated", "error", "candidates", "failed",
                 "interrupted"):
        if view == "running":
            cells.append("context = 'alpha beta gamma delta'")
        cells.append(RESTORE_MODEL if view == "error" else
                     _script_cell(VIEW_REPLIES[view], max_iterations=6, model=None))
        task_at[view] = len(cells)
        cells.append(VIEW_TASKS[view])
    write_notebook(scripted_lab.root / "views.ipynb", "rlm", "RLM (Python)", cells)
    nb = NotebookPage(page, scripted_lab, "views.ipynb").open()
    ids = {view: nb.cells()[i]["id"] for view, i in task_at.items()}
    shots: dict[str, Path] = {}

    def cell_of(view: str) -> tuple[int, dict[str, Any]]:
        now = nb.cells()
        i = [c["id"] for c in now].index(ids[view])
        return i, now[i]

    def steps_of(view: str) -> list[dict[str, Any]]:
        return [c for c in nb.cells() if (c["rlm"] or {}).get("role") == "step"
                and c["rlm"].get("task_cell") == ids[view]]

    def answer_of(view: str) -> dict[str, Any] | None:
        return next((c for c in nb.cells() if (c["rlm"] or {}).get("role") == "answer"
                     and c["rlm"].get("task_cell") == ids[view]), None)

    nb.run_all()
    # running: the task cell shows [*] while its first step cell is there
    nb.wait_for(lambda: steps_of("running") and is_running(cell_of("running")[1]["prompt"]),
                120, "the running task's first step cell")
    shots["running"] = nb.screenshot("view_task_running", cell=cell_of("running")[0])
    assert is_running(cell_of("running")[1]["prompt"]), "the task finished before the shot"
    # a %%rlm body is prose while its task runs: plain text, no Python token; the step
    # cell below it is Python, highlighted (the check can see highlighting)
    _, task = cell_of("running")
    assert task["mime"] == "text/plain" and task["highlighted"] == 0, task
    step = steps_of("running")[0]
    assert step["mime"] != "text/plain" and step["highlighted"], step

    # interrupted: a prose task cell, plain text while it runs (before the kernel's
    # run_started said so); then the stop button
    nb.wait_for(lambda: steps_of("interrupted") and is_running(cell_of("interrupted")[1]["prompt"]),
                RUN_TIMEOUT, "the interrupted task's first step cell")
    index, task = cell_of("interrupted")
    nb.scroll_to(index)
    index, task = cell_of("interrupted")
    assert "jp-rlm-prose" in task["classes"] and task["mime"] == "text/plain", task
    assert task["highlighted"] == 0, task
    shots["interrupted_running"] = nb.screenshot("view_interrupted_running", cell=index)
    nb.interrupt_kernel()
    nb.wait_for(lambda: prompt_count(cell_of("interrupted")[1]["prompt"]) is not None,
                RUN_TIMEOUT, "the last task cell to finish")
    nb.wait_for(lambda: answer_of("interrupted"), ANSWER_TIMEOUT, "the last answer cell")
    nb.page.wait_for_timeout(1000)  # the last display updates render

    # finished: its steps below it with counts, a plain (green) answer from the data
    index, task = cell_of("running")
    shots["finished"] = nb.screenshot("view_task_finished", cell=index)
    steps = steps_of("running")
    assert len(steps) == 2 and all(prompt_count(c["prompt"]) for c in steps), nb.summary()
    assert "4" in (answer_of("running") or {}).get("text", ""), answer_of("running")
    shown = task["text"] + answer_of("running")["text"]
    assert not [k for k, v in ANSWER_SOURCES.items() if k != "data" and v in shown], shown

    # the task cell's result is numbered as the task cell (In [n], Out[n]), and the
    # answer cell of an answer from the data has no caution mark
    outs = [o for o in task["outputs"] if o["output_type"] == "execute_result"]
    assert [o["execution_count"] for o in outs] == [prompt_count(task["prompt"])], outs
    assert "jp-rlm-tone-ok" in answer_of("running")["classes"]

    # no data: said before any model call; the answer says it read no data of the user's;
    # the prose task cell is plain text, not Python (What's is no string)
    index, task = cell_of("no_data")
    shots["no_data"] = nb.screenshot("view_no_data", cell=index)
    assert "this task has no data of yours" in task["text"], task["text"]
    # ipykernel's subshell thread, started mid-step for the widgets, is not the step's
    assert not [c["text"] for c in steps_of("no_data") if "thread(s) running" in c["text"]]
    # the task cell and the answer cell say it in the same words
    words = answer_of("no_data")["rlm"].get("ending_words") or "(none sent)"
    assert "The answer was reached without" in words, answer_of("no_data")
    assert words in task["text"] and words in answer_of("no_data")["text"], task["text"]
    assert "jp-rlm-tone-caution" in answer_of("no_data")["classes"]
    assert "jp-rlm-prose" in task["classes"] and task["mime"] == "text/plain", task

    # stuck: stopped early, says so, the best answer so far marked as such
    index, task = cell_of("stuck")
    shots["stuck"] = nb.screenshot("view_stuck", cell=index)
    stuck_text = task["text"] + (answer_of("stuck") or {}).get("text", "")
    assert "the run stopped because the model repeated itself" in stuck_text, stuck_text
    # the answer is shown for what it is (its kind's sentence, the caution mark), never
    # as a plain success
    assert [k for k, v in ANSWER_SOURCES.items() if k != "data" and v in task["text"]], task
    assert "jp-rlm-tone-caution" in answer_of("stuck")["classes"]
    assert len(steps_of("stuck")) <= 3, nb.summary()
    # the "answer now" call after the stop is labelled as that, not as one more step
    labels = [c["label"] for c in steps_of("stuck")]
    assert labels[-1].startswith("answer now · run "), labels
    assert not [x for x in labels[:-1] if x.startswith("answer now")], labels

    # isolated: step cells with execution counts; the error is an IPython traceback
    index, task = cell_of("isolated")
    shots["isolated"] = nb.screenshot("view_isolated", cell=index)
    steps = steps_of("isolated")
    counts = [prompt_count(c["prompt"]) for c in steps]
    assert len(steps) == 3 and all(isinstance(c, int) for c in counts), nb.summary()
    assert counts == sorted(set(counts)) and counts[0] > (prompt_count(task["prompt"]) or 0)
    errors = error_outputs(steps[1])
    assert len(errors) == 1 and errors[0]["ename"] == "ZeroDivisionError", steps[1]["outputs"]
    shown = steps[1]["text"]
    assert f"Cell In[{counts[1]}], line 2" in shown and f"Cell In[{counts[0]}], line 2" in shown
    assert "Traceback (most recent call last)" not in "".join(
        str(o.get("text", "")) for o in steps[1]["outputs"])  # not also as stderr text
    nb.scroll_to([c["id"] for c in nb.cells()].index(steps[1]["id"]))
    shots["error"] = nb.screenshot("view_isolated_error")

    # a failed start: one readable line, no progress block left behind
    index, task = cell_of("error")
    shots["failed_start"] = nb.screenshot("view_failed_start", cell=index)
    assert "OPENAI_API_KEY" in task["text"], task["text"]
    assert "step 0 of" not in task["text"] and "starting…" not in task["text"], task["text"]
    assert not steps_of("error")

    # candidates: one rendered summary in the task cell; the chosen candidate's steps
    index, task = cell_of("candidates")
    shots["candidates"] = nb.screenshot("view_candidates", cell=index)
    assert "Candidates: 3 ran · candidate 2 chosen (2 of 3 agreed" in task["text"], task["text"]
    assert not [c for c in nb.cells() if (c["rlm"] or {}).get("role") == "candidates"]
    steps = steps_of("candidates")
    assert steps and all(c["rlm"].get("candidate") == 2 for c in steps), nb.summary()
    assert all(re.fullmatch(r"step \d+ · candidate 2 · run \w{4}", c["label"] or "")
               for c in steps), [c["label"] for c in steps]
    assert "chosen by a vote: 2 of 3 candidates agreed" in \
        answer_of("candidates")["text"].lower()

    # each ending: its words and its colour, as the kernel sent them from the one table
    # (the answer cell's edge is TONES[tone]["bar"]), one screenshot each
    for view, (tone, words) in ENDINGS.items():
        # from the task cell, or from the last step when the answer cell is then below
        # the window
        nb.scroll_to(cell_of(view)[0])
        ids_now = [c["id"] for c in nb.cells()]
        at = ids_now.index(answer_of(view)["id"])
        shown = nb.page.evaluate(
            "(i) => { const n = document.querySelectorAll('.jp-Notebook .jp-Cell')[i];"
            " return !!n && n.getBoundingClientRect().bottom <= window.innerHeight; }", at)
        shots[f"ending_{view}"] = nb.screenshot(
            f"ending_{view}", cell=cell_of(view)[0] if shown else at - 1)
        answer = answer_of(view)
        sent = answer["rlm"]
        assert sent.get("tone") == tone, (view, sent)
        assert sent.get("ending_words") and sent["ending_words"] in answer["text"], (view, answer)
        assert words in sent["ending_words"], (view, sent)
        assert answer["edge"] == _rgb(TONES[tone]["bar"]), (view, answer["edge"], tone)
        assert f"jp-rlm-tone-{tone}" in answer["classes"], (view, answer["classes"])
    # a failed start makes no answer cell, so claims no colour; its words are in the cell
    index, task = cell_of("error")
    shots["ending_failed_start"] = nb.screenshot("ending_failed_start", cell=index)
    assert answer_of("error") is None and "OPENAI_API_KEY" in task["text"], task["text"]

    # prose after the runs: the prose task cells and %%rlm bodies show no Python token
    for view in ("no_data", "interrupted", "error", "running", "stuck", "failed"):
        nb.scroll_to(cell_of(view)[0])
        _, task = cell_of(view)
        assert task["mime"] == "text/plain" and task["highlighted"] == 0, (view, task)

    # export: the toolbar's command says it is done in a toast, not only in the
    # notification centre
    nb.select_cell(cell_of("running")[0])
    nb.palette("RLM export")
    nb.wait_for(lambda: "Exported RLM run" in nb.toasts(), 60, "the export's toast")
    nb.page.wait_for_timeout(2000)  # it has slid in, and is still there to be read
    assert "Exported RLM run" in nb.toasts(), "the export's toast went within 2 s"
    shots["export_toast"] = nb.screenshot("view_export_toast")

    # a prose task cell the user turns into code is code again when it runs
    index, _ = cell_of("no_data")
    nb.edit_cell(index, "greeting = 'hello'\nprint(greeting)")
    nb.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-cell')")
    nb.wait_for(lambda: "hello" in cell_of("no_data")[1]["text"].split("print(greeting)")[-1],
                60, "the edited cell's output")
    nb.scroll_to(cell_of("no_data")[0])
    _, task = cell_of("no_data")
    assert task["mime"] != "text/plain" and task["highlighted"], task

    # a python3 kernel: the body of a %%rlm cell is prose too, before and after its run
    write_notebook(scripted_lab.root / "magic.ipynb", "python3", "Python 3",
                   ["%load_ext rlm_kernel", _script_cell(VIEW_REPLIES["no_data"]),
                    "%%rlm\nWhat's the greeting? Say hello.", "x = 'hello'"])
    py = NotebookPage(page, scripted_lab, "magic.ipynb").open()
    assert py.cells()[2]["mime"] == "text/plain" and py.cells()[2]["highlighted"] == 0, \
        py.cells()[2]
    py.run_all()
    py.wait_for(lambda: prompt_count(py.cells()[-1]["prompt"]) is not None, RUN_TIMEOUT,
                "the python3 notebook's last cell")
    py.page.wait_for_timeout(500)
    cells = py.cells()
    task = next(c for c in cells if c["source"].startswith("%%rlm"))
    assert "hello to you" in task["text"], task["text"]
    assert task["mime"] == "text/plain" and task["highlighted"] == 0, task
    assert cells[-1]["mime"] != "text/plain" and cells[-1]["highlighted"], cells[-1]
    shots["python3_magic"] = py.screenshot("view_python3_rlm_cell", cell=0)
    for name, path in shots.items():
        assert path.exists() and path.stat().st_size > 10_000, (name, path)


def test_mcp_tools_in_the_task_cell_and_a_call_in_its_step_cell(scripted_lab, page, extension):
    """A run with ``c.RLM.mcp_servers`` naming the registry's ``mcp-server-git``: the
    task cell lists the tools the model can call, and the step cell whose code calls
    ``git.git_log`` shows the call and its result (scripted replies: the views are under
    test; the tool and its server are real)."""
    import json
    import os
    import subprocess
    import sys

    if not extension:
        pytest.fail(f"{EXTENSION_NAME} is not installed")
    repo = scripted_lab.root / "repo"
    repo.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "Ada", "GIT_AUTHOR_EMAIL": "ada@example.org",
           "GIT_COMMITTER_NAME": "Ada", "GIT_COMMITTER_EMAIL": "ada@example.org"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "start"],
                 ["commit", "-q", "--allow-empty", "-m", "parse words"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    config = scripted_lab.root / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"git": {"command": sys.executable,
                                                    "args": ["-m", "mcp_server_git"]}}}))
    replies = [block(f"log = git.git_log(repo_path={str(repo)!r}, max_count=1)\n"
                     "print(log.strip().splitlines()[-1])"),
               block("FINAL(log.strip().splitlines()[-1])")]
    cells = [_script_cell(replies, max_iterations=4, model=None, mcp_servers=str(config)),
             "%%rlm\nWhat did the last commit of the repository do?"]
    write_notebook(scripted_lab.root / "mcp.ipynb", "rlm", "RLM (Python)", cells)
    nb = NotebookPage(page, scripted_lab, "mcp.ipynb").open()
    task_id = nb.cells()[1]["id"]
    nb.run_all()

    def answer() -> dict[str, Any] | None:
        return next((c for c in nb.cells() if (c["rlm"] or {}).get("role") == "answer"
                     and c["rlm"].get("task_cell") == task_id), None)

    nb.wait_for(answer, 120, "the answer cell")
    nb.page.wait_for_timeout(1000)
    cells_now = nb.cells()
    index = [c["id"] for c in cells_now].index(task_id)
    task = cells_now[index]
    nb.screenshot("view_mcp_tools", cell=index)
    assert "MCP tools the model can call (12)" in task["text"], task["text"]
    assert "this task has no data of yours" not in task["text"]  # the servers are its data
    assert "git.git_log(repo_path: string, max_count: integer = 10" in task["text"]
    steps = [c for c in cells_now if (c["rlm"] or {}).get("role") == "step"
             and c["rlm"].get("task_cell") == task_id]
    assert "MCP git.git_log({" in steps[0]["text"], steps[0]["text"]
    assert "-> Commit history:" in steps[0]["text"] and "parse words" in steps[0]["text"]
    assert "Message: parse words" in answer()["text"], answer()
