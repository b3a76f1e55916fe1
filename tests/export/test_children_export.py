"""A run's sub-agents in its exports: the exported notebook folds each child's steps
under the step that started it (Markdown, never code run again), the rlm log lists each
child among its parent step's ``rlm_calls`` with its conversation and steps, and a run
ended by ``finish()`` shows its diff as a diff."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat

from rlm_kernel.export import export_rlm_log, export_run
from tests.engine.test_children import REPLIES
from tests.export.test_rlm_log import check_log
from tests.replies import block
from tests.scripted import scripted_rlm


def _result():
    rlm, _ = scripted_rlm(REPLIES, executor="in-process", max_depth=2, max_iterations=3,
                          child_max_iterations=2)
    return rlm.run("Ask twice.")


def test_the_notebook_folds_each_child_under_the_step_that_started_it(tmp_path: Path) -> None:
    result = _result()
    nb = export_run(result, tmp_path / "run.ipynb")
    nbformat.validate(nb)
    roles = [(c.metadata.rlm["role"], c.metadata.rlm["step"]) for c in nb.cells]
    assert roles == [("task", None), ("recorded", None), ("step", 1), ("step", 2),
                     ("children", 2), ("children", 2), ("answer", None)]
    first, second = (c for c in nb.cells if c.metadata.rlm["role"] == "children")
    assert first.cell_type == second.cell_type == "markdown"
    assert first.source.startswith("<details>\n<summary>Sub-agent 1 (depth 1): first?")
    assert "&rarr; c1:gc" in first.source and "rlm_query('deeper?')" in first.source
    # the grandchild is folded inside its parent's fold, not beside it
    assert "<summary>Sub-agent 1.1 (depth 2): deeper?" in first.source
    assert first.source.index("Sub-agent 1.1") < first.source.rindex("</details>")
    assert "Sub-agent 2 (depth 1): second?" in second.source
    # the children's code is never a code cell: a re-run does not run it again
    code = "".join(c.source for c in nb.cells
                   if c.cell_type == "code" and c.metadata.rlm["role"] != "recorded")
    assert "FINAL('gc')" not in code and "FINAL('c2')" not in code
    # the recorded cell holds the children's model replies (depth > 0), for a re-run
    recorded = next(c for c in nb.cells if c.metadata.rlm["role"] == "recorded")
    assert "FINAL('gc')" in recorded.source


def test_the_rlm_log_lists_children_among_their_steps_calls(tmp_path: Path) -> None:
    result = _result()
    lines = check_log(export_rlm_log(result, tmp_path / "run.jsonl", max_iterations=3,
                                     max_depth=2))
    iterations = lines[1:]
    assert len(iterations) == 2  # the top-level run's own two calls, not its children's
    calls = iterations[1]["code_blocks"][0]["result"]["rlm_calls"]
    assert [(c["prompt"], c["response"], c["child"]["id"]) for c in calls] == \
        [("first?", "c1:gc", "1"), ("second?", "c2", "2")]
    child = calls[0]["child"]
    assert child["depth"] == 1 and child["parent_step"] == 2
    assert child["messages"][-1] == {"role": "assistant", "content": REPLIES[2]}
    inner = child["code_blocks"][0]["result"]["rlm_calls"]
    assert [(c["child"]["id"], c["child"]["depth"]) for c in inner] == [("1.1", 2)]
    json.dumps(lines)


def test_a_finished_runs_answer_cell_shows_its_diff(tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    (folder / "a.txt").write_text("one\n")
    code = "open('a.txt', 'w').write('two\\n')\nfinish('Changed a.txt.')"
    rlm, _ = scripted_rlm([block(code)], workdir=str(folder), executor="in-process",
                          max_iterations=2)
    result = rlm.run("Change it.")
    nb = export_run(result)
    answer = nb.cells[-1].source
    assert answer.startswith("**Answer:** Changed a.txt.\n\n```diff\ndiff --git a/a.txt b/a.txt")
    assert "-one\n+two\n```" in answer
