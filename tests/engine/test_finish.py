"""``finish(message=None)`` in a working-folder run, in each executor: the run ends as with
``FINAL``, its answer the message and the folder's change as the host computed it; a
sub-agent may not finish; model code cannot hand in a diff of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replies import block
from tests.scripted import scripted_rlm

EXECUTORS = ["in-process", "isolated"]

PATCH = """--- a/lib.py
+++ b/lib.py
@@ -1,2 +1,2 @@
 def add(a, b):
-    return a - b
+    return a + b
"""


def _folder(root: Path) -> Path:
    root.mkdir()
    (root / "lib.py").write_text("def add(a, b):\n    return a - b\n")
    return root


@pytest.mark.parametrize("executor", EXECUTORS)
def test_finish_ends_the_run_with_the_message_and_the_hosts_diff(tmp_path: Path,
                                                                 executor: str) -> None:
    folder = _folder(tmp_path / "work")
    code = f"print(apply_patch({PATCH!r}))\nfinish('Fixed add: it subtracted.')"
    rlm, lm = scripted_rlm([block(code)], workdir=str(folder), executor=executor,
                           max_iterations=3)
    result = rlm.run("Fix add.")
    assert (result.stopped_by, result.answer_source) == ("final", "finish"), result.error
    assert result.diff is not None and result.diff.startswith("diff --git a/lib.py b/lib.py")
    assert "-    return a - b\n+    return a + b" in result.diff
    assert result.answer == f"Fixed add: it subtracted.\n\n{result.diff}"
    assert result.to_dict()["diff"] == result.diff
    assert result.steps == 1
    prompt = "\n".join(m["content"] for m in lm.calls[0])
    assert "- finish(message=None): end the run" in prompt


@pytest.mark.parametrize("executor", EXECUTORS)
def test_no_change_and_no_message(tmp_path: Path, executor: str) -> None:
    folder = _folder(tmp_path / "work")
    rlm, _ = scripted_rlm([block("finish()")], workdir=str(folder), executor=executor,
                          max_iterations=2)
    result = rlm.run("Look, change nothing.")
    assert (result.answer, result.diff) == ("(the working folder did not change)", "")
    assert result.answer_source == "finish"


FORGERIES = """
from rlm_kernel.termination import FinalOutput
try:
    finish(message=['not', 'text'])
except TypeError as exc:
    print("refused:", exc)
finish = lambda message=None: None      # rebinding: put back after the step
raise FinalOutput({"type": "finish", "message": "m", "diff": "forged", "problem": None})
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_model_code_cannot_forge_the_diff(tmp_path: Path, executor: str) -> None:
    folder = _folder(tmp_path / "work")
    (folder / "extra.txt").write_text("x\n")
    rlm, _ = scripted_rlm([block(FORGERIES), block("import os\nos.remove('extra.txt')\n"
                                                   "finish('Removed it.')")],
                          workdir=str(folder), executor=executor, max_iterations=3)
    result = rlm.run("Tidy up.")
    first = result.history.entries[0].output
    assert "refused: finish: message is a str or None, not list" in first
    assert result.steps == 2, result.answer  # the forged FinalOutput ended nothing
    assert result.diff is not None and "forged" not in (result.answer or "")
    assert "deleted file mode" in result.diff and "--- a/extra.txt" in result.diff


CHILD = """
try:
    finish('done')
except PermissionError as exc:
    FINAL(str(exc))
"""


@pytest.mark.parametrize("executor", EXECUTORS)
def test_a_sub_agent_may_not_finish(tmp_path: Path, executor: str) -> None:
    folder = _folder(tmp_path / "work")
    rlm, lm = scripted_rlm([block("a = rlm_query('Try to finish.')\nFINAL(a)"), block(CHILD)],
                           workdir=str(folder), executor=executor, max_iterations=2,
                           child_max_iterations=2)
    result = rlm.run("Ask a sub-agent.")
    assert (result.answer or "").startswith("finish() is not available to a sub-agent")
    assert result.answer_source != "finish" and result.diff is None
    child_prompt = "\n".join(m["content"] for m in lm.calls[1])
    assert "finish(" not in child_prompt.split("Working folder:")[1]


def test_finish_called_again_in_a_step_computes_no_new_diff(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from rlm_kernel.executors.folder_diff import FolderBaseline

    calls = []
    diff = FolderBaseline.diff
    monkeypatch.setattr(FolderBaseline, "diff", lambda self: calls.append(1) or diff(self))
    folder = _folder(tmp_path / "work")
    code = ("for i in range(200):\n    try:\n        finish(f'try {i}')\n"
            "    except BaseException:\n        pass\n")
    rlm, _ = scripted_rlm([block(code)], workdir=str(folder), executor="isolated",
                          max_iterations=2)
    result = rlm.run("Finish many times.")
    assert len(calls) == 1 and result.answer == "try 0\n\n(the working folder did not change)"
