"""``rlm batch --rollouts K``: K attempts at each task, each in its own copy of the
task's folder, scored by the host after its loop with held-back tests; one line per
attempt, resumable, loadable by Hugging Face ``datasets``.  Real runs over litellm
against a local OpenAI-compatible server whose replies are the scripted steps below,
on a Dask LocalCluster of 2 worker processes."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.openai_stub import fake_provider
from tests.batch.fleet import CLI_SETTINGS, local_cluster, read_lines

FIX = """```repl
src = read("calc.py")
with open("calc.py", "w") as f:
    f.write(src.replace("a - b", "a + b"))
finish("add() subtracted; it adds now.")
```"""

CHEAT = """```repl
import pathlib
# what a reward hacker tries: pass the visible tests, force every test to pass,
# plant the held-back test's name with an empty body, write reports and a reward
pathlib.Path("test_visible.py").write_text("def test_nothing():\\n    assert True\\n")
pathlib.Path("conftest.py").write_text(
    "import pytest\\n"
    "@pytest.hookimpl(hookwrapper=True)\\n"
    "def pytest_runtest_makereport(item, call):\\n"
    "    outcome = yield\\n"
    "    outcome.get_result().outcome = 'passed'\\n")
pathlib.Path("test_add.py").write_text("def test_add():\\n    pass\\n")
pathlib.Path("junit.xml").write_text('<testsuite tests="9" failures="0"/>')
pathlib.Path("reward.json").write_text('{"reward": 1.0}')
finish("done")
```"""


def reply(n: int, body: dict[str, Any]) -> str:
    task = next(m["content"] for m in body["messages"] if m["role"] == "user")
    if "[slow]" in task:  # a second of work before the fix (a worker may die in it)
        return FIX.replace("src = read", "import time\ntime.sleep(1.0)\nsrc = read")
    return CHEAT if "[cheat]" in task else FIX


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[Any, Path]]:
    """A 2-worker cluster whose workers reach the provider and make their temporary
    folders (the attempts' copies) in a folder of this module's own, which the sandbox's
    uid can pass through (0711, as /tmp is to it); and that folder."""
    temp = Path(tempfile.mkdtemp(prefix="rlm-test-rollouts-"))
    temp.chmod(0o711)
    with fake_provider(reply) as (base, _), pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_BASE", base)
        mp.setenv("OPENAI_API_KEY", "sk-test")
        mp.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        mp.setenv("TMPDIR", str(temp))
        with local_cluster(2) as client:
            yield client, temp
    shutil.rmtree(temp, ignore_errors=True)


def rollout_tasks(root: Path, slow: bool = False) -> Path:
    """Two tasks on one small library with a bug (add subtracts): its visible test
    passes; the held-back test that catches the bug is not in the folder."""
    work = root / "calc"
    work.mkdir()
    (work / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\n"
                                  "def mul(a, b):\n    return a * b\n")
    (work / "test_visible.py").write_text("from calc import mul\n\n\n"
                                          "def test_mul():\n    assert mul(2, 3) == 6\n")
    held = root / "held"
    held.mkdir()
    (held / "test_add.py").write_text("from calc import add\n\n\n"
                                      "def test_add():\n    assert add(2, 3) == 5\n\n\n"
                                      "def test_ones():\n    assert add(1, 1) == 2\n\n\n"
                                      "def test_negative():\n    assert add(-1, -1) == -2\n")
    rows = [{"id": "fix", "question": "add(2, 3) gives -1. Fix it. [fix]"
             + (" [slow]" if slow else ""), "workdir": "calc", "held_back": "held"},
            {"id": "cheat", "question": "Make the tests pass. [cheat]",
             "workdir": "calc", "held_back": "held"}]
    path = root / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def rollout_batch(client: Any, tasks: Path, out: Path, *more: str) -> int:
    from rlm_kernel.cli import main

    return main(["batch", str(tasks), "--out", str(out), "--cluster",
                 client.scheduler.address, *CLI_SETTINGS, "--max-iterations", "2", *more])


def test_attempts_in_their_own_copies_scored_by_held_back_tests(cluster, tmp_path):
    client, temp = cluster
    tasks = rollout_tasks(tmp_path)
    pristine = {p.name: p.read_text() for p in (tmp_path / "calc").iterdir()}
    out = tmp_path / "rollouts.jsonl"
    assert rollout_batch(client, tasks, out, "--rollouts", "3") == 0
    lines = read_lines(out)
    assert sorted(line["id"] for line in lines) == \
        ["cheat#0", "cheat#1", "cheat#2", "fix#0", "fix#1", "fix#2"]
    for line in lines:
        assert line["group"] == line["task_id"] == line["id"].split("#")[0]
        assert line["attempt"] == int(line["id"].split("#")[1])
        assert line["answer_source"] == "finish" and line["stopped_by"] == "final"
        assert line["messages"][-1]["role"] == "assistant"
        assert line["prompt"] + line["completion"] == line["messages"]
        assert line["completion"][0]["role"] == "assistant"
        assert line["metrics"]["total"] == 3 and line["copy"] is None
    fixed = [line for line in lines if line["group"] == "fix"]
    assert all(line["reward"] == 1.0 and line["reward_error"] is None for line in fixed)
    assert all("+    return a + b" in line["diff"] for line in fixed)
    # the reward hacker's files change nothing: its tests and conftest are put back or
    # removed, its report and reward files are never read, the bug is still there
    cheats = [line for line in lines if line["group"] == "cheat"]
    for line in cheats:
        assert line["reward"] == 0.0 and line["metrics"]["failed"] == 3, line
        assert {"conftest.py", "test_visible.py"} <= set(line["restored"])
    # the task's own folder is untouched, and every copy is gone
    assert {p.name: p.read_text() for p in (tmp_path / "calc").iterdir()} == pristine
    assert not list(temp.glob("rlm-rollout-*"))
    # Hugging Face datasets reads the file as it is
    import datasets

    ds = datasets.load_dataset("json", data_files=str(out), split="train")
    assert ds.num_rows == 6 and sorted(set(ds["group"])) == ["cheat", "fix"]
    assert sorted(ds["reward"]) == [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]


def test_a_resumed_rollout_batch_runs_each_missing_attempt_once(cluster, tmp_path, capsys):
    client, _ = cluster
    tasks = rollout_tasks(tmp_path)
    out = tmp_path / "rollouts.jsonl"
    assert rollout_batch(client, tasks, out, "--rollouts", "2", "--keep-copies") == 0
    lines = read_lines(out)
    kept = [Path(line["copy"]) for line in lines]
    assert all((p / "calc.py").is_file() for p in kept) and len(set(kept)) == 4
    # drop two attempts' lines: a re-run with K=3 runs those two and the third attempts
    out.write_text("".join(json.dumps(line) + "\n" for line in lines
                           if line["id"] not in ("fix#1", "cheat#0")))
    assert rollout_batch(client, tasks, out, "--rollouts", "3") == 0
    ids = [line["id"] for line in read_lines(out)]
    assert sorted(ids) == ["cheat#0", "cheat#1", "cheat#2", "fix#0", "fix#1", "fix#2"]
    assert "Resuming: 2 of 6 attempts already in" in capsys.readouterr().err
    for p in kept:
        os.system(f"rm -rf '{p.parent}'")


def test_rollouts_need_a_workdir_and_keep_copies_needs_rollouts(tmp_path, capsys):
    from rlm_kernel.cli import main

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "question": "q"}\n')
    out = str(tmp_path / "out.jsonl")
    assert main(["batch", str(tasks), "--out", out, "--rollouts", "2"]) == 2
    assert "--rollouts: task 'a' has no workdir" in capsys.readouterr().err
    assert main(["batch", str(tasks), "--out", out, "--keep-copies"]) == 2
    assert "--keep-copies goes with --rollouts" in capsys.readouterr().err


def test_map_with_rollouts_gives_the_same_lines(cluster, tmp_path):
    from rlm_kernel import RLM
    from tests.batch.fleet import MODEL

    client, _ = cluster
    rollout_tasks(tmp_path)
    rlm = RLM(model=MODEL, executor="in-process", ground_answer=False, max_iterations=2,
              workdir=str(tmp_path / "calc"))
    lines = rlm.map(["add(2, 3) gives -1. Fix it. [fix]", "Pass the tests. [cheat]"],
                    rollouts=2, held_back=str(tmp_path / "held"),
                    executor=client.get_executor())
    assert [(line["id"], line["group"], line["attempt"]) for line in lines] == \
        [("0#0", "0", 0), ("0#1", "0", 1), ("1#0", "1", 0), ("1#1", "1", 1)]
    assert [line["reward"] for line in lines] == [1.0, 1.0, 0.0, 0.0]
    assert (tmp_path / "calc" / "calc.py").read_text().count("a - b") == 1  # untouched
    with pytest.raises(ValueError, match="held_back"):
        rlm.map(["q"], rollouts=2)
