"""``rlm batch`` never writes over its input (t5 y20 and its siblings).

Shared fault case y20_batch_out_is_not_a_results_file.py: ``--out`` naming the tasks file
cut the file's last row and skipped the rest as done.  A results file is now recognised
by its lines (each holds every key of a result line, which a task row never has); the
tasks file by any path, symlink or hard link is refused, and so is any file that is not
a results file, each with one message and exit code 2, the file left byte for byte; a
results file cut mid-line loses no whole row; ids that differ never share a notebook.
"""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import nbformat
import pytest

from rlm_kernel.batch import ResultsFile, ResultsFileError, notebook_path, result_line
from rlm_kernel.cli import main
from rlm_kernel.engine import RLMResult
from tests.batch.fleet import CLI_SETTINGS, provider_env, read_lines

ROWS = [{"id": f"q{i}", "question": f"Question number {i}?"} for i in range(1, 5)]


def _tasks(folder: Path, rows: list[dict] = ROWS, newline_at_end: bool = False) -> Path:
    """A tasks file whose last row has no newline, as editors and json.dump loops
    leave it."""
    path = folder / "tasks.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + ("\n" if newline_at_end else ""))
    return path


def _line(task_id: str, answer: str = "an answer") -> str:
    """A result line's text as ``rlm batch`` writes it (no newline)."""
    result = RLMResult(question="q", answer=answer, stopped_by="final")
    return json.dumps(result_line(task_id, result, "tcp://w:1"), ensure_ascii=False)


def _batch(tasks: Path, out: Path | str, *more: str) -> int:
    return main(["batch", str(tasks), "--out", str(out), "--cluster", "local:1",
                 *CLI_SETTINGS, *more])


def _refused(capsys, tasks: Path, out: Path | str, says: str) -> None:
    """The batch refuses ``out`` before anything runs: exit 2, one message on stderr."""
    before = {p: p.read_bytes() for p in tasks.parent.iterdir() if p.is_file()}
    assert _batch(tasks, out) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("rlm batch: ") and says in lines[0], err
    assert "Traceback" not in err
    after = {p: p.read_bytes() for p in tasks.parent.iterdir() if p.is_file()}
    assert after == before  # no file written, cut or removed


def test_out_naming_the_tasks_file_is_refused_and_the_file_kept(tmp_path, capsys):
    """Shared fault case y20_batch_out_is_not_a_results_file.py."""
    tasks = _tasks(tmp_path)
    _refused(capsys, tasks, tasks, "is the tasks file")


@pytest.mark.parametrize("spelling", ["relative", "dot-dot", "symlink", "hard link",
                                      "symlinked folder"])
def test_out_is_the_tasks_file_by_any_path(tmp_path, capsys, monkeypatch, spelling):
    tasks = _tasks(tmp_path)
    (tmp_path / "sub").mkdir()
    if spelling == "relative":
        monkeypatch.chdir(tmp_path)
        out: Path | str = "tasks.jsonl"
    elif spelling == "dot-dot":
        out = tmp_path / "sub" / ".." / "tasks.jsonl"
    elif spelling == "symlink":
        out = tmp_path / "sub" / "results.jsonl"
        out.symlink_to(tasks)
    elif spelling == "hard link":
        out = tmp_path / "sub" / "results.jsonl"
        os.link(tasks, out)
    else:
        (tmp_path / "alias").symlink_to(tmp_path)
        out = tmp_path / "alias" / "tasks.jsonl"
    _refused(capsys, tasks, out, "is the tasks file")


@pytest.mark.parametrize("other", ["qa dataset", "task rows", "one task row, no newline",
                                   "text", "json array", "result lines then a task row"])
def test_out_that_is_not_a_results_file_is_refused_and_kept(tmp_path, capsys, other):
    tasks = _tasks(tmp_path, newline_at_end=True)
    out = tmp_path / "other.jsonl"
    out.write_text({
        "qa dataset": '{"id": "q1", "question": "Who?", "answer": "Ishmael"}\n'
                      '{"id": "q2", "question": "What?", "answer": "A whale"}',
        "task rows": '{"id": "q1", "question": "Who?"}\n{"id": "q9", "question": "Why?"}\n',
        "one task row, no newline": '{"id": "q1", "question": "Who?"}',
        "text": "Call me Ishmael.\nSome years ago",
        "json array": "[1, 2, 3]\n",
        "result lines then a task row": _line("q1") + "\n" + '{"id": "q2", "question": "Q"}',
    }[other])
    _refused(capsys, tasks, out, "is not a results file of rlm batch: line ")


@pytest.mark.parametrize("special", ["a folder", "a pipe", "/dev/null"])
def test_out_that_is_not_a_regular_file_is_refused(tmp_path, capsys, special):
    tasks = _tasks(tmp_path, newline_at_end=True)
    if special == "a folder":
        out: Path | str = tmp_path / "results"
        out.mkdir()
    elif special == "a pipe":
        out = tmp_path / "results.jsonl"
        os.mkfifo(out)  # reading it would wait for a writer forever
    else:
        out = special
    assert _batch(tasks, out) == 2
    assert "is not a regular file" in capsys.readouterr().err


def test_the_refusal_names_the_line_and_what_a_results_file_holds(tmp_path):
    out = tmp_path / "mixed.jsonl"
    out.write_text(_line("q1") + "\n\n" + _line("q2") + "\n" + '{"id": "q3", "answer": 1}\n')
    with pytest.raises(ResultsFileError) as caught:
        ResultsFile(out)
    assert "line 4 is not a result line" in str(caught.value)
    assert "stopped_by" in str(caught.value)


@pytest.mark.parametrize("cut", [1, 5, 9, 14, 20, 40, -1])
def test_a_results_file_cut_mid_line_keeps_every_whole_row(tmp_path, cut):
    """A batch killed while writing its third line: the two whole rows stay, the cut
    one goes (wherever the cut fell) and its task runs again."""
    whole = _line("q1") + "\n" + _line("q2", "2 \u2028 lines") + "\n"
    third = _line("q3").encode()
    out = tmp_path / "results.jsonl"
    out.write_bytes(whole.encode() + third[:cut])
    with ResultsFile(out) as results:
        assert results.done == {"q1", "q2"}
        results.write(result_line("q3", RLMResult(question="q", answer="3",
                                                  stopped_by="final"), None))
    assert [line["id"] for line in read_lines(out)] == ["q1", "q2", "q3"]
    assert out.read_text().startswith(whole)


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path):
    out = tmp_path / "results.jsonl"
    out.write_text(_line("q1") + "\n" + _line("q2"))  # edited by hand, newline lost
    with ResultsFile(out) as results:
        assert results.done == {"q1", "q2"}
        results.write(result_line("q3", RLMResult(question="q", answer="3",
                                                  stopped_by="final"), None))
    assert [line["id"] for line in read_lines(out)] == ["q1", "q2", "q3"]


def test_a_cut_line_alone_is_not_taken_for_a_results_file(tmp_path):
    """Cut inside its id, a lone line cannot be told from other data: refused, kept."""
    out = tmp_path / "results.jsonl"
    out.write_text('{"id": "q')
    with pytest.raises(ResultsFileError, match="nor one cut short"):
        ResultsFile(out)
    assert out.read_text() == '{"id": "q'
    out.write_text(_line("q1")[:25])  # past the id: the start of a result line
    with ResultsFile(out) as results:
        assert results.done == set()
    assert out.read_text() == ""


COLLIDING_IDS = ["q1", "Q1", "a/b", "a_b", "a:b", "a b", "a\\b", "a*b", "con", "CON", "nul",
                 unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café"),
                 "..", ".", "-x", "x~y", "x_y", "A" * 300, "A" * 299 + "B", "é" * 200,
                 "tasks", "results", "a.b", "a.B"]


def test_ids_that_differ_never_share_a_notebook_name():
    names = [notebook_path("nb", task_id).name for task_id in COLLIDING_IDS]
    folded = {unicodedata.normalize("NFC", name).casefold() for name in names}
    assert len(folded) == len(COLLIDING_IDS)  # even on a case-blind, normalising disk
    for name in names:
        assert name.isascii() and len(name.encode()) <= 255 and name.endswith(".ipynb")
        assert not set(name) & set('/\\:*?"<>|') and not name.startswith((".", "-"))
        assert name.split(".")[0].lower() not in {"con", "nul", "prn", "aux"}
    assert notebook_path("nb", "q1").name == "q1.ipynb"  # a plain id is its own name


def test_a_killed_batch_resumes_from_its_cut_file_and_exports_every_id_apart(tmp_path,
                                                                             capsys):
    """End to end: the real CLI on a Dask cluster of one worker, the fake provider.
    The results file holds q1 whole and the start of a cut line; the tasks' ids
    differ only in case or in characters a file name cannot hold."""
    ids = ["q1", "Q1", "a/b", "a_b", "a:b"]
    for n, _ in enumerate(ids):
        (tmp_path / f"c{n}.txt").write_text(f"0:answer {n}")  # the fleet's reply reads it
    tasks = _tasks(tmp_path, [{"id": i, "question": f"Question {i}", "context": f"c{n}.txt"}
                              for n, i in enumerate(ids)], newline_at_end=True)
    out = tmp_path / "results.jsonl"
    out.write_text(_line("q1", "FROM BEFORE") + "\n" + _line("Q1")[:30])
    with provider_env() as seen:
        assert _batch(tasks, out, "--export", str(tmp_path / "nb")) == 0
    assert len(seen) == 4  # every id but q1, once
    lines = read_lines(out)
    assert [line["id"] for line in lines][0] == "q1" and lines[0]["answer"] == "FROM BEFORE"
    assert sorted(line["id"] for line in lines) == sorted(ids)
    assert {line["id"]: line["answer"] for line in lines[1:]} == {
        i: f"ANSWER {n}" for n, i in enumerate(ids) if n}
    assert "Resuming: 1 of 5 tasks" in capsys.readouterr().err
    notebooks = sorted((tmp_path / "nb").iterdir())
    assert len(notebooks) == 4
    for task_id in ids[1:]:
        nb = nbformat.read(notebook_path(tmp_path / "nb", task_id), as_version=4)
        assert f"Question {task_id}" in json.dumps(nb)


@pytest.mark.parametrize("code", [
    "x = []\nfor _ in range(100_000):\n    x = [x]\nFINAL(x)",
    "class Mine:\n    def __reduce__(self):\n        return (print, ('ran on the client',))\n"
    "FINAL(Mine())",
    "FINAL({'n': [1, 2.5, None, ('t',)], 'b': b'x'})",
], ids=["too deep to pickle", "a class of model code", "plain data"])
def test_a_task_sends_back_plain_data_or_its_answers_text(code, monkeypatch):
    """What a batch worker sends to the client (pickled by Dask) runs no code of the
    model's when unpickled and always pickles: an answer value that is not plain data
    is replaced by the answer's text."""
    import pickle

    from bench.openai_stub import fake_provider
    from rlm_kernel.batch import run_row
    from rlm_kernel.engine import RLMConfig

    reply = f"```repl\n{code}\n```"
    with fake_provider(lambda n: reply) as (base, _):
        monkeypatch.setenv("OPENAI_API_BASE", base)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        config = RLMConfig(model="openai/gpt-4o-mini", executor="in-process",
                           ground_answer=False, max_iterations=1)
        outcome = run_row(config, {"id": "t", "question": "Build it.", "context": None})
    result = outcome.result
    assert result.stopped_by == "final" and result.answer
    back = pickle.loads(pickle.dumps(outcome))
    if code.startswith("FINAL({"):
        assert back.result.answer_value == {"n": [1, 2.5, None, ("t",)], "b": b"x"}
    else:
        assert back.result.answer_value == result.answer  # its text
