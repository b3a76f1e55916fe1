"""``%rlm export run.jsonl --format rlm`` / ``rlm run --export run.jsonl``: the run as
alexzhang13/rlm's trajectory log, checked against a schema written from its
visualizer's ``types.ts``."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from rlm_kernel.export import export_rlm_log
from tests.scripted import scripted_rlm

SCHEMA = json.loads((Path(__file__).with_name("rlm_log.schema.json")).read_text())


def check_log(path: Path) -> list[dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    defs = SCHEMA["definitions"]
    jsonschema.validate(lines[0], {**defs["metadata"], "definitions": defs})
    for line in lines[1:]:
        assert line["type"] == "iteration"
        jsonschema.validate(line, {**defs["iteration"], "definitions": defs})
    return lines


def test_a_scripted_runs_log_has_the_visualizers_fields(tmp_path):
    rlm, _ = scripted_rlm(["Thinking first.",
                           "```repl\nx = llm_query('say ok')\nprint(x)\n```",
                           "```repl\n1/0\n```",
                           "```repl\nFINAL(x)\n```"], sub_replies=["ok"])
    result = rlm.run("q", context="abc")
    lines = check_log(export_rlm_log(result, tmp_path / "run.jsonl", max_iterations=12,
                                     max_depth=1))
    iterations = lines[1:]
    assert [it["iteration"] for it in iterations] == [1, 2, 3, 4]
    assert iterations[0]["code_blocks"] == [] and iterations[0]["response"] == "Thinking first."
    block = iterations[1]["code_blocks"][0]
    assert block["code"] == "x = llm_query('say ok')\nprint(x)"
    assert block["result"]["stdout"] == "ok\n"
    assert block["result"]["rlm_calls"][0]["prompt"] == "say ok"
    assert "ZeroDivisionError" in iterations[2]["code_blocks"][0]["result"]["stderr"]
    assert iterations[-1]["final_answer"] == "ok"
    assert iterations[0]["prompt"][0]["role"] == "system"
    assert lines[0]["max_iterations"] == 12


def test_the_path_must_end_with_jsonl(tmp_path):
    rlm, _ = scripted_rlm(["```repl\nFINAL(1)\n```"])
    result = rlm.run("q", context="a")
    with pytest.raises(ValueError, match=".jsonl"):
        export_rlm_log(result, tmp_path / "run.json")


@pytest.mark.slow
def test_a_real_runs_log_loads_with_the_visualizers_types(local_server, tmp_path):
    """The embedded model answers a question about a real file; the CLI writes the log."""
    from evals.questions import stdlib_dir
    from rlm_kernel.cli import main

    path = tmp_path / "run.jsonl"
    code = main(["run", "--context", str(stdlib_dir() / "json" / "__init__.py"),
                 "--max-iterations", "4", "--export", str(path), "--json",
                 "How many lines of this file start with 'import'?"])
    assert code in (0, 1) and path.exists()
    lines = check_log(path)
    assert len(lines) >= 2 and lines[0]["root_model"]
    assert all(it["prompt"] and it["response"] for it in lines[1:])
