"""``rlm run --json`` prints one strict (RFC 8259) JSON object whatever happens: a
non-finite answer (fault case x26), a run that cannot start or fails in any way, a
context too large for the isolated REPL's memory (fault case x31)."""

from __future__ import annotations

import json
import math

import pytest

import rlm_kernel.engine.rlm as loop
from rlm_kernel.cli import main
from rlm_kernel.cli.run import json_text
from rlm_kernel.engine import RLM
from rlm_kernel.executors.isolated import WorkerError
from rlm_kernel.models.scripted import ScriptedModel
from tests.scripted import scripted_rlm


def strict(text: str):
    """The one JSON object of ``text``; bare NaN / Infinity tokens fail."""
    def refuse(token):
        raise ValueError(f"not RFC 8259 JSON: {token}")

    assert text.count("\n") == 1 and text.endswith("\n"), text
    return json.loads(text, parse_constant=refuse)


def record(tmp_path, code: str):
    """A recorded run whose only step runs ``code`` (replayed by ``--replay``)."""
    ctx = tmp_path / "notes.txt"
    ctx.write_text("one two three")
    rlm, _ = scripted_rlm([f"```repl\n{code}\n```"], executor="in-process")
    result = rlm.run("q", context="one two three")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result.to_dict()))
    return ctx, path


@pytest.mark.parametrize("code,returns,expected", [
    ("x = float('nan')\nFINAL(x)", "float", "NaN"),
    ("FINAL(float('-inf'))", "float", "-Infinity"),
    ("x = {'a': float('inf'), 'b': [1e309, 1.5]}\nFINAL(x)", "dict",
     {"a": "Infinity", "b": ["Infinity", 1.5]}),
])
def test_a_non_finite_answer_is_strict_json(tmp_path, capsys, code, returns, expected):
    """Fault case x26."""
    ctx, path = record(tmp_path, code)
    rc = main(["run", "--replay", str(path), "--context", str(ctx), "--returns", returns,
               "--json", "--no-ground-answer", "--executor", "in-process"])
    out = strict(capsys.readouterr().out)
    assert rc == 0 and out["answer_value"] == expected and out["stopped_by"] == "final"


def test_json_text_turns_non_finite_keys_and_values_into_strings():
    data = {"v": [math.nan, (math.inf, -math.inf)], math.nan: 1, "ok": 0.5, "o": object()}
    out = strict(json_text(data))
    assert out["v"] == ["NaN", ["Infinity", "-Infinity"]] and out["NaN"] == 1
    assert out["ok"] == 0.5 and out["o"].startswith("<object")


def test_too_deep_data_is_still_one_object():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    out = strict(json_text({"answer": "a", "answer_value": deep}))
    assert out["answer"] == "a" and isinstance(out["answer_value"], str)


def _run_json(capsys, tmp_path, *extra):
    ctx = tmp_path / "big.txt"
    ctx.write_text("x" * 1000)
    rc = main(["run", "--context", str(ctx), "--model", "openai/whatever", "--json",
               *extra, "what is it?"])
    captured = capsys.readouterr()
    return rc, strict(captured.out), captured.err


def test_a_context_too_large_for_the_walls_memory_is_one_json_error(tmp_path, capsys,
                                                                   monkeypatch):
    """Fault case x31, without 2.2 GB: the executor fails as a worker over its memory
    limit does."""
    def too_small(kind, **options):
        raise WorkerError("the isolated REPL refused set: MemoryError (the value is "
                          "larger than the memory limit)")

    monkeypatch.setattr(loop, "executor_for", too_small)
    monkeypatch.setattr(RLM, "_clients", lambda self: (ScriptedModel(["x"]),) * 2)
    rc, out, err = _run_json(capsys, tmp_path)
    assert rc == 1 and out["stopped_by"] == "error" and out["answer"] is None
    assert "too large for the isolated REPL's memory limit" in out["error"]
    assert "1.0 KB" in out["error"] and "--executor in-process" in out["error"]
    assert "could not start" not in out["error"] and out["error"] in err


@pytest.mark.parametrize("exc,code,stopped_by,says", [
    (RuntimeError("boom"), 1, "error", "internal error: RuntimeError: boom"),
    (MemoryError(), 1, "error", "too large"),
    (KeyboardInterrupt(), 130, "interrupt", "interrupted"),
    (WorkerError("no bwrap"), 1, "error", "could not start: no bwrap"),
])
def test_any_failure_of_the_run_is_one_json_object(tmp_path, capsys, monkeypatch, exc, code,
                                                   stopped_by, says):
    def fail(self, *args, **kwargs):
        raise exc

    monkeypatch.setattr(RLM, "run", fail)
    rc, out, _ = _run_json(capsys, tmp_path)
    assert rc == code and out["stopped_by"] == stopped_by and says in out["error"]
    assert set(out) >= {"answer", "steps", "llm_calls", "prompt_tokens", "cost_usd",
                        "seconds", "stopped_by", "error"}


def test_bad_input_is_one_json_object_with_exit_code_2(tmp_path, capsys):
    rc = main(["run", "--context", str(tmp_path / "missing.txt"), "--json", "q"])
    out = strict(capsys.readouterr().out)
    assert rc == 2 and out["stopped_by"] == "error" and "missing.txt" in out["error"]
    (tmp_path / "a.txt").write_text("text")
    rc = main(["run", "--context", str(tmp_path / "a.txt"), "--returns", "no such type[",
               "--json", "q"])
    out = strict(capsys.readouterr().out)
    assert rc == 2 and out["error"].startswith("--returns")


def test_a_context_the_host_cannot_read_into_memory(tmp_path, capsys, monkeypatch):
    import rlm_kernel.cli.run as cli

    def out_of_memory(paths):
        raise MemoryError

    monkeypatch.setattr(cli, "load_contexts", out_of_memory)
    rc, out, _ = _run_json(capsys, tmp_path)
    assert rc == 1 and "too large" in out["error"] and "1.0 KB" in out["error"]
