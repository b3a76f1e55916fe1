"""``rlm run`` says how the answer was reached when it was not from the user's data by
code (one line), tells a task with no data so before the model is asked, and carries
``answer_source`` in ``--json`` (a scripted model stands in for the real one)."""

from __future__ import annotations

import json

import pytest

import rlm_kernel.engine as engine
from rlm_kernel.cli import main
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block


@pytest.fixture()
def replies(monkeypatch):
    """``rlm run`` builds an RLM whose clients are one scripted model with the replies
    the test puts in the returned list; it runs in-process."""
    monkeypatch.setenv("RLM_MODEL", "openai/scripted")  # no embedded model to prepare
    script: list[str] = []
    real = engine.RLM

    class Scripted(real):
        def __init__(self, *args, **kwargs):
            lm = ScriptedModel(list(script))
            kwargs.update(executor="in-process", verify_answer=False)
            super().__init__(*args, root_client=lm, sub_client=lm, **kwargs)

    monkeypatch.setattr(engine, "RLM", Scripted)
    return script


def test_a_task_with_no_data_is_told_and_its_answer_marked(replies, capsys):
    replies += [block("context = {'data': 'sample'}\nFINAL(list(context)[0])")]
    code = main(["run", "What is the first key?"])
    out = capsys.readouterr().out
    assert code == 0
    lines = out.splitlines()
    note = lines.index("No data: the model is told there is none and must answer from its "
                       "own knowledge or computation (give files with --context PATH).")
    assert note < next(i for i, line in enumerate(lines) if line.startswith("── step 1"))
    assert "Answer: data\nThe answer was reached without any data (none was given).\n" in out


def test_an_answer_that_did_not_read_the_given_file_is_marked(replies, capsys, tmp_path):
    (tmp_path / "a.txt").write_text("hello world\n")
    replies += [block("x = 2 + 2\nFINAL(x)")]
    assert main(["run", "--context", str(tmp_path / "a.txt"), "What is 2+2?"]) == 0
    out = capsys.readouterr().out
    assert "The answer was reached without reading your data.\n" in out
    assert "No data:" not in out


def test_an_answer_from_the_data_says_so_in_the_views_words(replies, capsys, tmp_path):
    (tmp_path / "a.txt").write_text("hello world\n")
    replies += [block("FINAL(len(context))")]
    assert main(["run", "--context", str(tmp_path / "a.txt"), "How long?"]) == 0
    out = capsys.readouterr().out
    assert "Answer: 12\nThe answer was computed by the model's code from your data.\n(" in out


def test_json_carries_the_source(replies, capsys, tmp_path):
    (tmp_path / "a.txt").write_text("hello world\n")
    replies += [block("FINAL(len(context))")]
    assert main(["run", "--json", "--context", str(tmp_path / "a.txt"), "How long?"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["answer_source"] == "data" and data["votes"] is None
    assert (data["tone"], data["ending"], data["ending_words"]) == (
        "ok", "data", "The answer was computed by the model's code from your data.")


def test_a_stuck_run_says_why_once_in_its_line_and_its_json(replies, capsys, tmp_path):
    (tmp_path / "a.txt").write_text("hello world\n")
    replies += [block("print(data)")] * 4 + ["I cannot tell."]
    main(["run", "--context", str(tmp_path / "a.txt"), "How long?"])
    out = capsys.readouterr().out
    # the ending in the views' words once, then what it repeated once
    assert "\nNo answer: the run stopped because the model repeated itself.\n" \
        "  step 2 repeats step 1 (" in out and "stuck: step" not in out
    assert out.count("repeated itself") == 1 and out.count("step 2 repeats step 1") == 1
    assert out.rstrip().endswith("stopped by stuck)")
    replies += [block("print(data)")] * 4 + ["I cannot tell."]
    main(["run", "--json", "--context", str(tmp_path / "a.txt"), "How long?"])
    data = json.loads(capsys.readouterr().out)
    assert data["stopped_by"] == "stuck" and data["answer"] is None
    assert data["error"].startswith("step 2 repeats step 1 (same ")
    assert (data["tone"], data["ending"], data["ending_words"]) == (
        "caution", "no_answer", "No answer: the run stopped because the model repeated itself.")
