"""``rlm run --replay``: a recorded run answered again without any model."""

from __future__ import annotations

import json

from rlm_kernel.cli import main
from rlm_kernel.export import export_run
from tests.scripted import scripted_rlm


def recorded(tmp_path, text: str):
    ctx = tmp_path / "notes.txt"
    ctx.write_text(text)
    rlm, _ = scripted_rlm(["```repl\nn = len(context.split())\nprint(n)\n```",
                           "```repl\nFINAL(n)\n```"])
    from rlm_kernel.context.files import load_contexts

    result = rlm.run("How many words?", context=load_contexts([str(ctx)]))
    return ctx, result


def test_replay_of_a_json_record_needs_no_model(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RLM_MODEL", "openai/no-such-model")  # would fail if called
    ctx, result = recorded(tmp_path, "one two three")
    record = tmp_path / "run.json"
    record.write_text(json.dumps(result.to_dict()))
    code = main(["run", "--replay", str(record), "--context", str(ctx), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer"] == "3" and out["diverged_at"] is None
    assert out["model"].startswith("replay/")


def test_replay_of_an_exported_notebook_reports_divergence(tmp_path, capsys):
    ctx, result = recorded(tmp_path, "one two three")
    notebook = tmp_path / "run.ipynb"
    export_run(result, notebook)
    ctx.write_text("one two three four")
    code = main(["run", "--replay", str(notebook), "--context", str(ctx)])
    captured = capsys.readouterr()
    assert code == 0 and "Answer: 4" in captured.out
    assert "diverged at step 1" in captured.err


def test_a_missing_record_is_one_usage_error(tmp_path, capsys):
    code = main(["run", "--replay", str(tmp_path / "none.ipynb"), "q"])
    assert code == 2 and "--replay" in capsys.readouterr().err


def test_json_trajectory_holds_the_children_and_a_replay_gives_them_again(tmp_path, capsys,
                                                                          monkeypatch):
    from tests.engine.test_children import REPLIES

    monkeypatch.setenv("RLM_MODEL", "openai/no-such-model")  # would fail if called
    rlm, _ = scripted_rlm(REPLIES, executor="in-process", max_depth=2, max_iterations=3,
                          child_max_iterations=2)
    record = tmp_path / "run.json"
    record.write_text(json.dumps(rlm.run("Ask twice.").to_dict()))
    code = main(["run", "--replay", str(record), "--max-depth", "2", "--executor",
                 "in-process", "--json", "--trajectory"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer"] == "c1:gc|c2"
    assert [(c["id"], c["parent"], c["depth"], c["parent_step"], c["answer"])
            for c in out["children"]] == [("1", "", 1, 2, "c1:gc"), ("1.1", "1", 2, 1, "gc"),
                                          ("2", "", 1, 2, "c2")]
    assert out["children"][1]["trajectory"][0]["code"] == "FINAL('gc')"
    assert out["messages"][-1]["role"] == "assistant"
