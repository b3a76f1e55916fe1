"""``rlm batch`` on a Dask LocalCluster of 2 worker processes (reached by its scheduler's
address, as a real cluster is), each task a real run over litellm against a local
OpenAI-compatible server (tests/batch/fleet.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from rlm_kernel.batch import result_line
from rlm_kernel.cli import main
from rlm_kernel.engine import RLMResult
from tests.batch.fleet import CLI_SETTINGS, batch, read_lines, write_tasks


def test_a_batch_on_two_workers_writes_every_id_once_with_its_answer(client, tmp_path,
                                                                    capsys):
    texts = {f"t{i}": f"0.3:word {i}" for i in range(6)}
    tasks = write_tasks(tmp_path, texts)
    out = tmp_path / "results.jsonl"
    assert batch(client, tasks, out, "--export", str(tmp_path / "nb")) == 0
    lines = read_lines(out)
    assert sorted(line["id"] for line in lines) == sorted(texts)
    for line in lines:
        assert line["answer"] == texts[line["id"]].split(":", 1)[1].upper()
        assert line["stopped_by"] == "final" and line["error"] is None
        assert line["steps"] == 1 and line["prompt_tokens"] == 100_000
        assert line["cost_usd"] > 0 and line["seconds"] >= 0.3
    assert {line["worker"] for line in lines} == set(client.nthreads())  # both worked
    for task_id in texts:
        nb = nbformat.read(tmp_path / "nb" / f"{task_id}.ipynb", as_version=4)
        nbformat.validate(nb)
        code = "".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "time.sleep" in code and f"{task_id}.txt" in code  # the step and the setup
    err = capsys.readouterr().err
    assert "6 answered, 0 failed" in err


def test_a_resumed_batch_runs_only_what_was_missing(client, provider, tmp_path, capsys):
    texts = {"a": "0:alpha", "b": "0:beta", "c": "0:gamma", "d": "0:delta"}
    tasks = write_tasks(tmp_path, texts)
    out = tmp_path / "results.jsonl"
    before = [result_line(task_id, RLMResult(question="q", answer="FROM BEFORE",
                                             stopped_by="final"), None) for task_id in "ac"]
    out.write_text("".join(json.dumps(line) + "\n" for line in before))
    requests = len(provider)
    assert batch(client, tasks, out) == 0
    assert len(provider) - requests == 2  # b and d, one model call each
    lines = read_lines(out)
    assert [line["id"] for line in lines[:2]] == ["a", "c"]  # kept as they were
    assert sorted(line["id"] for line in lines) == ["a", "b", "c", "d"]
    assert {line["id"]: line["answer"] for line in lines[2:]} == {"b": "BETA", "d": "DELTA"}
    assert "Resuming: 2 of 4 tasks" in capsys.readouterr().err
    assert batch(client, tasks, out) == 0  # all done: nothing runs
    assert len(provider) - requests == 2 and len(read_lines(out)) == 4
    assert "nothing to run" in capsys.readouterr().err


def test_max_cost_stops_submission_and_lets_running_tasks_finish(client, tmp_path, capsys):
    texts = {f"t{i}": f"0.5:w{i}" for i in range(8)}
    tasks = write_tasks(tmp_path, texts)
    out = tmp_path / "results.jsonl"
    assert batch(client, tasks, out, "--max-cost", "0.03") == 1  # two tasks' worth
    lines = read_lines(out)
    ids = [line["id"] for line in lines]
    assert len(ids) == len(set(ids)) and 2 <= len(ids) < 8
    spent, after = 0.0, 0
    for line in lines:  # in the order they finished
        after += spent >= 0.03
        spent += line["cost_usd"]
    assert after <= 2  # only tasks already running when the budget was reached
    err = capsys.readouterr().err
    assert "--max-cost $0.03 reached" in err and f"{8 - len(ids)} not run" in err
    assert batch(client, tasks, out) == 0  # the re-run does the rest
    assert sorted(line["id"] for line in read_lines(out)) == sorted(texts)


def test_a_task_that_fails_has_its_error_line_and_the_batch_exits_1(client, tmp_path,
                                                                      capsys):
    tasks = write_tasks(tmp_path, {"ok": "0:fine"})
    with tasks.open("a") as f:
        f.write(json.dumps({"id": "gone", "question": "q", "context": "missing.txt"}) + "\n")
    out = tmp_path / "results.jsonl"
    assert batch(client, tasks, out) == 1
    lines = {line["id"]: line for line in read_lines(out)}
    assert lines["ok"]["answer"] == "FINE"
    assert lines["gone"]["stopped_by"] == "error" and lines["gone"]["answer"] is None
    assert "context path not found" in lines["gone"]["error"]
    assert lines["gone"]["worker"] in client.nthreads()  # read, and failed, on a worker
    assert "1 answered, 1 failed" in capsys.readouterr().err


@pytest.mark.parametrize(("row", "says"), [
    ('{"id": "x"}', "line 2: question: Field required"),
    ('{"id": "x", "question": "q", "contxt": "a.txt"}', "line 2: contxt: unknown key"),
    ('{"id": "a", "question": "q"}', "line 2: id 'a' is already used on line 1"),
    ('{"id": "x", "question": "q", "max_iterations": 0}', "line 2: max_iterations:"),
    ('{"id": "x", "question": ', "line 2: not JSON"),
    ('["x", "q"]', "line 2: a task is a JSON object"),
])
def test_a_bad_tasks_file_is_one_error_naming_its_line(tmp_path, capsys, row, says):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "question": "q"}\n' + row + "\n")
    out = tmp_path / "results.jsonl"
    assert main(["batch", str(tasks), "--out", str(out), *CLI_SETTINGS]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # nothing ran


@pytest.mark.parametrize(("flags", "says"), [
    (["--cluster", "local:0"], "N >= 1"),
    (["--cluster", "my-laptop"], "a Dask scheduler address such as tcp://"),
])
def test_a_bad_cluster_is_one_error(tmp_path, capsys, flags, says):
    tasks = write_tasks(tmp_path, {"a": "0:x"})
    assert main(["batch", str(tasks), "--out", str(tmp_path / "o.jsonl"), *flags]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_the_progress_bar_shows_done_running_failed_and_usd(client, tmp_path):
    client.wait_for_workers(2, timeout=60)  # both slots there (a restarted worker rejoins)
    tasks = write_tasks(tmp_path, {"a": "0.5:x", "b": "0.5:y"})
    with tasks.open("a") as f:
        f.write(json.dumps({"id": "c", "question": "q", "context": "missing.txt"}) + "\n")
    out = tmp_path / "results.jsonl"
    settings = [flag for flag in CLI_SETTINGS if flag != "--no-progress"]
    # the command in its own process, as a user runs it: tqdm.auto picks its bar once per
    # process, a widget where an IPython kernel was set up (as tests of this suite do)
    done = subprocess.run([sys.executable, "-m", "rlm_kernel.cli", "batch", str(tasks),
                           "--out", str(out), "--cluster", client.scheduler.address,
                           *settings], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    err = done.stderr
    assert "rlm batch: 100%" in err and "3/3" in err
    assert "running 2" in err  # both workers busy at some point
    assert "running 0, failed 1, $0.0300" in err  # the end: two answers at $0.015 each


def test_an_unreachable_scheduler_is_one_error_and_leaves_no_results_file(tmp_path, capsys):
    tasks = write_tasks(tmp_path, {"a": "0:x"})
    out = tmp_path / "o.jsonl"
    argv = ["batch", str(tasks), "--out", str(out), "--cluster", "tcp://127.0.0.1:9",
            "--no-progress"]
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):  # default 30 s
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert "cannot reach the cluster tcp://127.0.0.1:9" in err and "Traceback" not in err
    assert not out.exists()
