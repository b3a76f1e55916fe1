"""``rlm run --returns TYPE``: the answer validated as the type, given typed in --json."""

from __future__ import annotations

import json

from rlm_kernel.cli import main
from tests.scripted import scripted_rlm


def record(tmp_path, final: str):
    ctx = tmp_path / "notes.txt"
    ctx.write_text("one two three")
    rlm, _ = scripted_rlm([f"```repl\nFINAL({final})\n```"])
    from rlm_kernel.context.files import load_contexts

    result = rlm.run("How many words?", context=load_contexts([str(ctx)]))
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result.to_dict()))
    return ctx, path


def test_json_gives_the_typed_value(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RLM_MODEL", "openai/no-such-model")  # replayed: never called
    ctx, path = record(tmp_path, "'3'")
    code = main(["run", "--replay", str(path), "--context", str(ctx), "--returns", "int",
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer_type"] == "int" and out["answer_value"] == 3
    code = main(["run", "--replay", str(path), "--context", str(ctx), "--no-ground-answer", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and "answer_value" not in out and out["answer"] == "3"


def test_a_json_schema_file(tmp_path, capsys):
    ctx, path = record(tmp_path, "['one', 'two']")
    schema = tmp_path / "words.json"
    schema.write_text(json.dumps({"type": "array", "items": {"type": "string"}}))
    code = main(["run", "--replay", str(path), "--context", str(ctx), "--returns",
                 str(schema), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer_value"] == ["one", "two"]


def test_an_unreadable_type_is_a_usage_error(tmp_path, capsys):
    ctx, path = record(tmp_path, "3")
    code = main(["run", "--replay", str(path), "--context", str(ctx), "--returns",
                 "list[str"])
    assert code == 2 and "--returns: cannot read the type 'list[str'" in \
        capsys.readouterr().err


def test_a_replay_asks_for_the_recorded_type_again(tmp_path, capsys):
    ctx = tmp_path / "notes.txt"
    ctx.write_text("one two three")
    rlm, _ = scripted_rlm(["```repl\nFINAL('3')\n```"])
    from rlm_kernel.context.files import load_contexts

    result = rlm.run("How many words?", context=load_contexts([str(ctx)]), output_type=int)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(result.to_dict()))
    code = main(["run", "--replay", str(path), "--context", str(ctx), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer_type"] == "int" and out["answer_value"] == 3
