"""A candidates run exported: the notebook's summary cell and metadata, the rlm log's
metadata line, and a replay of the exported notebook (the chosen trajectory)."""

from __future__ import annotations

import nbformat

from rlm_kernel.engine import RLM
from rlm_kernel.engine.replay.recording import load_recording
from rlm_kernel.export import export_rlm_log, export_run
from tests.export.test_rlm_log import check_log
from tests.replies import block
from tests.scripted import scripted_rlm


def candidates_run():
    rlm, _ = scripted_rlm([block("x = 41\nFINAL_VAR('x')"),
                           block("y = 6 * 7\nprint(y)"), block("FINAL_VAR('y')"),
                           block("z = 42\nFINAL_VAR('z')")], candidates=3)
    result = rlm.run("What is it?", context="the data")
    assert result.answer == "42" and result.candidates[1]["chosen"]
    return result


def test_the_notebook_sums_up_the_candidates_and_holds_the_chosen_steps(tmp_path):
    result = candidates_run()
    nb = export_run(result, tmp_path / "run.ipynb")
    nbformat.validate(nb)
    roles = [c.metadata["rlm"]["role"] for c in nb.cells]
    assert roles == ["task", "candidates", "recorded", "step", "step", "answer"]
    summary = nb.cells[1].source
    assert summary.startswith("### Candidates\n\n3 candidates ran; the answer most of them "
                              "agree on won (candidate 2, 2 votes)")
    rows = [line for line in summary.splitlines() if line.startswith("| ") and
            line[2].isdigit()]
    assert rows[0].startswith("| 1 | 41 | 1 | 1 | 0 | `final` |")
    assert rows[1].startswith("| 2 | 42 | 2 | 2 | 0 | `final` |") and "**chosen**" in rows[1]
    assert rows[2].startswith("| 3 | 42 | 2 | 1 | 0 | `final` |")
    assert nb.metadata["rlm"]["candidates"] == result.candidates
    assert [c.source.splitlines()[-1] for c in nb.cells if c.metadata["rlm"]["role"] ==
            "step"] == ["print(y)", "FINAL_VAR('y')"]
    again = RLM(replay=load_recording(tmp_path / "run.ipynb"), verify_answer=False).run(
        "What is it?", context="the data")
    assert again.answer == "42" and again.diverged_at is None and again.steps == 2


def test_a_single_run_notebook_has_no_candidates_cell(tmp_path):
    rlm, _ = scripted_rlm([block("x = 1\nFINAL_VAR('x')")])
    result = rlm.run("q", context="c")
    nb = export_run(result)
    assert "candidates" not in [c.metadata["rlm"]["role"] for c in nb.cells]
    assert "candidates" not in nb.metadata["rlm"]


def test_the_rlm_log_metadata_line_lists_the_candidates(tmp_path):
    result = candidates_run()
    lines = check_log(export_rlm_log(result, tmp_path / "run.jsonl", max_iterations=12,
                                     max_depth=1))
    assert lines[0]["candidates"] == result.candidates
    assert len(lines) == 3 and lines[-1]["final_answer"] == "42"  # the chosen iterations
