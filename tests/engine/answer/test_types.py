"""Typed answers (``RLM.run(..., output_type=...)``): the model is told the type, a FINAL
value is validated and coerced by pydantic, a failed one goes back to the model as its
own failed step.  Scripted models: this is the loop's mechanics."""

from __future__ import annotations

import dataclasses
import json
import typing

import pydantic
import pytest
from typing_extensions import TypedDict

from rlm_kernel import RLM
from rlm_kernel.engine.answer.types import AnswerType, AnswerTypeError, parse_type
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm


@dataclasses.dataclass
class Package:
    name: str
    size: int


class Row(TypedDict):
    name: str
    count: int


class Release(pydantic.BaseModel):
    version: str
    year: int


def run(replies, output_type, **config):
    events = []
    rlm, lm = scripted_rlm(replies, events=events, **config)
    return rlm.run("How many?", context="a\nb\nc", output_type=output_type), lm, events


def test_a_text_answer_is_coerced_to_the_asked_type():
    res, _, _ = run([block('FINAL("3")')], int)
    assert res.stopped_by == "final"
    assert res.answer_value == 3 and type(res.answer_value) is int
    assert res.answer == "3" and res.answer_type == "int"


def test_the_model_is_told_the_type_in_the_task_and_in_each_step_line():
    res, _, _ = run([block("print(len(context))"), block("FINAL(['3'])")], "list[str]")
    prompts = res.root_prompts
    assert "The answer must be of type list[str]" in prompts[0][1]["content"]
    assert "(answer type: list[str])" in prompts[1][-1]["content"]


def test_a_value_that_fails_goes_back_to_the_model_as_a_failed_step():
    res, _, events = run([block("FINAL(['a', 2])"), block("FINAL(['a', 'b'])")], "list[str]")
    assert res.stopped_by == "final" and res.answer_value == ["a", "b"]
    assert res.steps == 2
    first = res.history.entries[0]
    assert "FINAL not accepted: expected list[str]: [1]: Input should be a valid string" \
        in first.output
    notices = [e for e in events if e.kind == "step_notice"]
    assert [(n.step, n.reason) for n in notices] == [(1, "answer_type")]
    # the model read the errors before its second try
    second_prompt = res.root_prompts[1][-1]["content"]
    assert second_prompt.startswith("Your FINAL was not accepted: expected list[str]")


def test_a_refused_final_names_the_models_own_variables_of_the_type():
    """Seen with the embedded model: told only the type, it passed the same int to
    FINAL ten times while a list[str] of its own sat in the namespace."""
    code = "phrases = ['Bad Request', 'Request Timeout']\ncount = len(phrases)\nFINAL(count)"
    rlm, _ = scripted_rlm([block(code), block("FINAL_VAR('phrases')")])
    res = rlm.run(
        "Which phrases?", context=["Bad Request", "Request Timeout", "OK"],
        output_type="list[str]")
    second_prompt = res.root_prompts[1][-1]["content"]
    assert "Your variables of that type: phrases (e.g. FINAL_VAR('phrases')" in second_prompt
    assert "context" not in second_prompt.split("Your variables of that type:")[1]  # input
    assert res.answer_value == ["Bad Request", "Request Timeout"]


def test_a_refused_final_with_no_variable_of_the_type_says_nothing_more():
    res, _, _ = run([block("n = 3\nFINAL(n)"), block("FINAL(['x'])")], "list[str]")
    assert "Your variables of that type" not in res.root_prompts[1][-1]["content"]


def test_a_run_whose_last_final_fails_has_no_answer_and_says_why():
    res, _, _ = run([block("FINAL('many')")] * 3, int, max_iterations=2, repeat_limit=None)
    assert res.answer is None and res.answer_value is None
    assert res.stopped_by == "max_iterations"
    assert "expected int" in (res.error or "")


@pytest.mark.parametrize("spec, given, expected", [
    (Package, {"name": "bash", "size": "12"}, Package("bash", 12)),
    (Row, {"name": "x", "count": 2.0}, {"name": "x", "count": 2}),
    (Release, '{"version": "3.11", "year": 2022}', Release(version="3.11", year=2022)),
    ("dict[str, int]", "{'a': 1}", {"a": 1}),
    ("bool", "yes", True),
    ('Literal["yes", "no"]', "no", "no"),
    ("tuple[str, int]", ["a", "1"], ("a", 1)),
])
def test_structured_types_validate(spec, given, expected):
    res, _, _ = run([block(f"FINAL({given!r})")], spec)
    assert res.stopped_by == "final", res.history.entries[-1].output
    assert res.answer_value == expected


def test_summary_gives_the_typed_value_as_json_data():
    res, _, _ = run([block("FINAL({'name': 'bash', 'size': 7})")], Package)
    data = json.loads(json.dumps(res.summary()))
    assert data["answer_type"] == "Package"
    assert data["answer_value"] == {"name": "bash", "size": 7}
    assert json.loads(res.answer) == {"name": "bash", "size": 7}


def test_without_a_type_nothing_changes():
    res, _, _ = run([block("FINAL('3')")], None)
    assert res.answer_value == "3" and res.answer_type is None
    assert "answer_type" not in res.summary()


def test_the_value_code_cannot_escape_validation():
    def evil():
        yield "a"
        raise SystemExit("bye")

    at = AnswerType(list[str])
    with pytest.raises(AnswerTypeError, match=r"expected list\[str\].*SystemExit"):
        at.validate(evil())


def test_a_typing_typeddict_on_old_python_gets_a_readable_error():
    class Old(typing.TypedDict):
        name: str

    import sys
    if sys.version_info >= (3, 12):
        assert AnswerType(Old).validate({"name": "a"}) == {"name": "a"}
    else:
        with pytest.raises(TypeError, match="typing_extensions.TypedDict"):
            AnswerType(Old)


def test_type_text_is_read_safely():
    assert parse_type("list[str] | None").validate(None) is None
    assert parse_type("Package", {"Package": Package}).validate(
        {"name": "a", "size": 1}) == Package("a", 1)
    with pytest.raises(ValueError, match="only names"):
        parse_type("__import__('os').system('true')")
    with pytest.raises(ValueError, match="unknown type name 'Pkg'"):
        parse_type("Pkg")


def test_a_json_schema_file(tmp_path):
    path = tmp_path / "files.json"
    path.write_text(json.dumps({"title": "files", "type": "array",
                                "items": {"type": "string"}}))
    at = parse_type(str(path))
    assert at.name == "files" and at.validate('["a.py"]') == ["a.py"]
    assert '"items":{"type":"string"}' in at.prompt_line()
    with pytest.raises(AnswerTypeError, match="is not of type 'string'"):
        at.validate([1])
    with pytest.raises(ValueError, match="cannot read"):
        parse_type(str(tmp_path / "missing.json"))


def test_an_unsupported_type_is_refused_before_the_run():
    lm = ScriptedModel([block("FINAL(1)")])
    with pytest.raises(TypeError, match="cannot check answers"):
        RLM(root_client=lm, sub_client=lm).run("q", context="x", output_type=object())
