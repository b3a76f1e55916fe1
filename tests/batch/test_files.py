"""The tasks file's rows and the results file's lines, without a cluster."""

from __future__ import annotations

import json

import pytest

from rlm_kernel.batch import ResultsFile, TaskFileError, read_tasks, result_line
from rlm_kernel.engine import RLMResult


def test_a_row_takes_its_limits_and_paths_relative_to_the_tasks_file(tmp_path, monkeypatch):
    (tmp_path / "sub").mkdir()
    tasks = tmp_path / "sub" / "tasks.jsonl"
    tasks.write_text(
        '{"id": 7, "question": "q", "context": "docs/a.txt", "returns": "int", '
        '"max_iterations": 3, "max_cost_usd": 0.5}\n\n'
        '{"id": "u", "question": "q", "context": "s3://bucket/key.txt"}\n')
    monkeypatch.chdir(tmp_path)  # not where the paths are read from
    first, second = read_tasks(tasks)
    assert first.id == "7" and first.returns == "int"
    assert first.context == str(tmp_path / "sub" / "docs" / "a.txt")
    assert first.limits() == {"max_iterations": 3, "max_cost_usd": 0.5}
    assert second.context == "s3://bucket/key.txt" and second.limits() == {}


def test_an_empty_or_missing_tasks_file_is_an_error(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(TaskFileError, match="no tasks"):
        read_tasks(empty)
    with pytest.raises(TaskFileError, match="cannot read the tasks file"):
        read_tasks(tmp_path / "none.jsonl")


def test_the_results_file_never_holds_two_lines_for_one_id(tmp_path):
    path = tmp_path / "out" / "results.jsonl"
    result = RLMResult(question="q", answer="42", stopped_by="final")
    with ResultsFile(path) as out:
        assert out.write(result_line("a", result, "tcp://w:1"))
        assert not out.write(result_line("a", result, "tcp://w:2"))
    with ResultsFile(path) as again:
        assert again.done == {"a"}
        assert not again.write(result_line("a", result, "tcp://w:3"))
    lines = [json.loads(t) for t in path.read_text().splitlines()]
    assert [(x["id"], x["answer"], x["worker"]) for x in lines] == [("a", "42", "tcp://w:1")]


def _line(task_id: str, answer: str) -> str:
    """A result line's text, as the results file writes it (no newline)."""
    result = RLMResult(question="q", answer=answer, stopped_by="final")
    return json.dumps(result_line(task_id, result, None))


def test_a_line_cut_by_a_killed_batch_is_removed_and_its_task_run_again(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(_line("a", "1") + "\n" + _line("b", "2")[:20])  # killed mid-write
    with ResultsFile(path) as out:
        assert out.done == {"a"}  # b runs again
        out.write(result_line("b", RLMResult(question="q", answer="2", stopped_by="final"),
                              None))
    lines = [json.loads(t) for t in path.read_text().splitlines()]
    assert [(x["id"], x["answer"]) for x in lines] == [("a", "1"), ("b", "2")]


def test_a_typed_answer_is_written_as_its_json_value(tmp_path):
    result = RLMResult(question="q", answer="[1, 2]", answer_value=[1, 2],
                       stopped_by="final", answer_type="list[int]")
    line = result_line("a", result, "w")
    assert line["answer_value"] == [1, 2] and line["stopped_by"] == "final"
    assert set(line) >= {"id", "answer", "answer_value", "steps", "prompt_tokens",
                         "completion_tokens", "cost_usd", "seconds", "stopped_by", "error",
                         "worker"}
