"""The rollout REPL in Jupyter, in a real kernel (jupyter_client): ``run_tests()`` and
``finish()`` of a working folder in the RLM kernel (``c.RLM.workdir``) and with
``%%rlm --workdir DIR`` in a python3 kernel: the test counts in the step's output, the
run ended by finish with the host's diff as its answer.  Scripted model (the mechanics),
a real pytest project, the isolated executor's worker behind its wall."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kernel_client import announce_frontend, execute, script_model, start, stop
from tests.replies import block

STEPS = [block("print(run_tests())"),
         block("src = read('calc.py')\nopen('calc.py', 'w').write(src.replace('a - b', 'a + b'))\n"
               "print(run_tests())\nfinish('Fixed add: it subtracted.')")]


def _project(root: Path) -> Path:
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_zero():\n    assert add(0, 0) == 0\n")
    return root


def _comm_data(messages: list[dict]) -> list[dict]:
    return [m["content"]["data"] for m in messages
            if m["msg_type"] in ("comm_open", "comm_msg")
            and "type" in (m["content"].get("data") or {})]


@pytest.mark.parametrize("kernel", ["rlm", "python3"])
def test_run_tests_and_finish_in_a_real_kernel(kernel: str, tmp_path: Path) -> None:
    folder = _project(tmp_path / "work")
    km, kc = start(kernel)
    try:
        if kernel == "python3":
            reply, _ = execute(kc, "%load_ext rlm_kernel")
            assert reply["content"]["status"] == "ok"
            script_model(kc, STEPS)
            task = f"%%rlm --workdir {folder}\nFix the add function."
        else:
            script_model(kc, STEPS, workdir=str(folder))
            task = "Fix the add function."
        announce_frontend(kc)
        reply, messages = execute(kc, task, cell_id="task")
        assert reply["content"]["status"] == "ok", reply["content"]
        data = _comm_data(messages)
        printed: dict[int, str] = {}
        for d in data:
            if d["type"] == "step_output":
                printed[d["step"]] = printed.get(d["step"], "") + \
                    "".join(d["output"].get("text", ""))
        assert "1 passed, 1 failed, 0 errors in " in printed[1], printed
        assert "2 passed, 0 failed" in printed[2], printed
        end = next(d for d in data if d["type"] == "run_finished")
        assert end["answer_source"] == "finish" and end["stopped_by"] == "final"
        assert end["answer"].startswith("Fixed add: it subtracted.\n\ndiff --git a/calc.py")
        assert "-    return a - b\n+    return a + b" in end["answer"]
        assert end["diff"].startswith("diff --git a/calc.py b/calc.py")
        assert (folder / "calc.py").read_text().count("a + b") == 1  # the change is made
    finally:
        stop(km, kc)


def test_a_sub_agent_unfolds_under_the_step_that_started_it(tmp_path: Path) -> None:
    km, kc = start("rlm")
    try:
        script_model(kc, [block("a = rlm_query('Look at it.')\nprint('got', a)"),
                          block("print('child step')\nFINAL('seen')"),
                          block("FINAL(a)")], max_depth=1)
        announce_frontend(kc)
        reply, messages = execute(kc, "Ask a sub-agent.", cell_id="task")
        assert reply["content"]["status"] == "ok", reply["content"]
        data = _comm_data(messages)
        folds = [d["output"] for d in data if d["type"] == "step_output"
                 and "text/markdown" in d["output"].get("data", {})]
        assert len(folds) == 1 and [d["step"] for d in data if d["type"] == "step_output"
                                    and d["output"] in folds] == [1]
        markdown = folds[0]["data"]["text/markdown"]
        assert markdown.startswith("<details>\n<summary>Sub-agent 1 (depth 1): Look at it.")
        assert "print('child step')" in markdown and "&rarr; seen" in markdown
        assert folds[0]["data"]["text/plain"] == "Sub-agent 1: seen"
        end = next(d for d in data if d["type"] == "run_finished")
        assert end["answer"] == "seen"
    finally:
        stop(km, kc)
