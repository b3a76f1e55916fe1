"""Tests for rlm_kernel.termination: every example of the termination spec, plus our
deliberate changes."""

from __future__ import annotations

import re
from dataclasses import fields

import pytest

from rlm_kernel.termination import (
    FINAL,
    FINAL_PATTERNS,
    FINAL_VAR,
    FINAL_VAR_PATTERNS,
    FinalDetection,
    FinalOutput,
    detect_final_in_code,
    detect_final_in_text,
    extract_code_blocks,
    format_final_answer,
    resolve_final_var,
)

FENCE = "`" * 3


def run_model_code(code: str, namespace: dict) -> object:
    """What the host does: run code, catch FinalOutput, resolve and format the answer."""
    try:
        exec(code, namespace)
    except FinalOutput as e:
        if e.output["type"] == "variable":
            answer = resolve_final_var(e.output["var"], namespace)
        else:
            answer = e.output["answer"]
        return format_final_answer(answer)
    return None


# --- FINAL / FINAL_VAR / FinalOutput -------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    ["The answer is 42", {"sentiment": "positive", "confidence": 0.95}, ["item1", "item2", "item3"]],
)
def test_final_raises_with_direct_payload(answer):
    with pytest.raises(FinalOutput) as info:
        FINAL(answer)
    assert info.value.output == {"answer": answer, "type": "direct"}


def test_final_output_example_prints_dict():
    try:
        FINAL("The answer is 42")
    except FinalOutput as e:
        assert e.output == {"answer": "The answer is 42", "type": "direct"}
    else:  # pragma: no cover - FINAL must raise
        pytest.fail("FINAL did not raise")


def test_final_var_payload_and_resolution_in_model_code():
    namespace = {"analyze_document": lambda c: {"summary": c.upper()}, "context": "doc",
                 "FINAL_VAR": FINAL_VAR}
    code = 'result = analyze_document(context)\nsummary = result["summary"]\nFINAL_VAR("summary")'
    with pytest.raises(FinalOutput) as info:
        exec(code, namespace)
    assert info.value.output == {"var": "summary", "type": "variable"}
    assert "answer" not in info.value.output
    assert resolve_final_var(info.value.output["var"], namespace) == "DOC"


def test_final_output_is_base_exception_not_exception():
    assert issubclass(FinalOutput, BaseException)
    assert not issubclass(FinalOutput, Exception)


def test_except_exception_cannot_swallow_final():
    with pytest.raises(FinalOutput) as info:
        try:
            FINAL(1)
        except Exception:  # what careless model code writes
            pass
    assert info.value.output["answer"] == 1


def test_except_exception_in_model_code_lets_final_var_through():
    code = "x = 5\ntry:\n    FINAL_VAR('x')\nexcept Exception:\n    print('swallowed')\n"
    assert run_model_code(code, {"FINAL_VAR": FINAL_VAR}) == "5"


def test_final_raised_from_nested_helper_reaches_host():
    code = "def helper():\n    for i in range(3):\n        if i == 2:\n            FINAL(i)\nhelper()"
    assert run_model_code(code, {"FINAL": FINAL}) == "2"


@pytest.mark.parametrize("bad", [42, None, ["x"], {"a": 1}])
def test_final_var_rejects_a_value_instead_of_a_name(bad):
    with pytest.raises(TypeError, match=r"NAME as a string.*FINAL\(value\)"):
        FINAL_VAR(bad)


# --- detect_final_in_text --------------------------------------------------------------


def test_detect_in_text_spec_examples():
    r = detect_final_in_text('Based on my analysis, FINAL("42")')
    assert (r.detected, r.final_type, r.content) == (True, "direct", "42")
    r = detect_final_in_text('I have stored the answer. FINAL_VAR("result")')
    assert (r.detected, r.final_type, r.content) == (True, "variable", "result")
    r = detect_final_in_text("Let me continue analyzing...")
    assert r.detected is False and r.final_type is None and r.content is None


@pytest.mark.parametrize(
    ("text", "kind", "content"),
    [
        ("FINAL(The answer is 42)", "direct", "The answer is 42"),
        ('FINAL("The answer is 42")', "direct", "The answer is 42"),
        ('FINAL("""Multi-line answer""")', "direct", "Multi-line answer"),
        ('FINAL("""two\nlines""")', "direct", "two\nlines"),
        ("FINAL_VAR(result)", "variable", "result"),
        ('FINAL_VAR("result")', "variable", "result"),
        ("FINAL_VAR('result')", "variable", "result"),
        ("done: FINAL(foo(bar))\nthanks", "direct", "foo(bar)"),
    ],
)
def test_detect_in_text_pattern_table(text, kind, content):
    r = detect_final_in_text(text)
    assert (r.detected, r.final_type, r.content) == (True, kind, content)
    assert r.raw_match is not None and r.raw_match in text


def test_final_var_is_not_read_as_final_with_var_argument():
    r = detect_final_in_text('FINAL_VAR("x")')
    assert r.final_type == "variable" and r.content == "x"


@pytest.mark.parametrize("text", ["FINAL( answer )", "FINAL (answer)", "FINAL(answer)"])
def test_whitespace_tolerance(text):
    assert detect_final_in_text(text).content == "answer"


# --- pattern tables --------------------------------------------------------------------


def test_pattern_tables_shape_and_flags():
    assert len(FINAL_PATTERNS) == 3 and len(FINAL_VAR_PATTERNS) == 2
    assert all(isinstance(p, re.Pattern) for p in FINAL_PATTERNS + FINAL_VAR_PATTERNS)
    assert FINAL_PATTERNS[0].flags & re.DOTALL and FINAL_PATTERNS[0].flags & re.MULTILINE
    assert FINAL_PATTERNS[1].flags & re.DOTALL and FINAL_PATTERNS[2].flags & re.DOTALL


def test_each_pattern_matches_its_table_example():
    assert FINAL_PATTERNS[0].search("FINAL(x +\n y)\n").group(1) == "x +\n y"
    assert FINAL_PATTERNS[1].search('FINAL("quoted string")').group(1) == "quoted string"
    assert FINAL_PATTERNS[2].search('FINAL("""triple quoted""")').group(1) == "triple quoted"
    assert FINAL_VAR_PATTERNS[0].search("FINAL_VAR(name)").group(1) == "name"
    assert FINAL_VAR_PATTERNS[0].search('FINAL_VAR("name")').group(1) == "name"
    assert FINAL_VAR_PATTERNS[1].search("FINAL_VAR('name')").group(1) == "name"
    assert FINAL_VAR_PATTERNS[1].search("FINAL_VAR(name)") is None


# --- detect_final_in_code --------------------------------------------------------------


def test_detect_in_code_spec_examples():
    r = detect_final_in_code("answer = 42\nFINAL(answer)")
    assert (r.detected, r.final_type, r.content) == (True, "direct", None)
    r = detect_final_in_code('FINAL_VAR("my_result")')
    assert (r.detected, r.final_type, r.content) == (True, "variable", "my_result")
    assert r.raw_match == 'FINAL_VAR("my_result")'


@pytest.mark.parametrize(
    "code",
    [
        "FINALIZE(x)",
        "FINAL_VALUE = 3\nprint(FINAL_VALUE)",
        "# call FINAL(x) when done",
        "msg = 'FINAL(x)'",
        "obj.FINAL(3)",
        "x = 1",
    ],
)
def test_detect_in_code_ignores_lookalikes(code):
    assert detect_final_in_code(code).detected is False


def test_detect_in_code_falls_back_to_regex_when_untokenizable():
    r = detect_final_in_code("x = (\nFINAL_VAR('y')")
    assert (r.detected, r.final_type, r.content) == (True, "variable", "y")
    assert detect_final_in_code("x = (\nFINAL(1)").final_type == "direct"


def test_detect_in_code_finds_call_inside_block():
    r = detect_final_in_code("if n < 100:\n    FINAL('too short')\nelse:\n    pass")
    assert r.detected and r.final_type == "direct" and r.content is None


# --- resolve_final_var -----------------------------------------------------------------


def test_resolve_final_var_spec_example():
    namespace = {"result": 42, "data": [1, 2, 3]}
    assert resolve_final_var("result", namespace) == 42
    with pytest.raises(KeyError) as info:
        resolve_final_var("missing_var", namespace)
    message = str(info.value)
    assert "'missing_var'" in message and "['result', 'data']" in message


def test_resolve_final_var_hides_dunder_names_from_listing():
    with pytest.raises(KeyError) as info:
        resolve_final_var("nope", {"__builtins__": {}, "x": 1})
    assert "['x']" in str(info.value) and "__builtins__" not in str(info.value)


def test_resolve_final_var_returns_falsy_values():
    assert resolve_final_var("z", {"z": 0}) == 0
    assert resolve_final_var("n", {"n": None}) is None


# --- extract_code_blocks ---------------------------------------------------------------


def test_extract_code_blocks_spec_example():
    response = (
        "\nLet me analyze the data.\n\n"
        f"{FENCE}python\nresult = sum(data)\nprint(result)\n{FENCE}\n\n"
        "And then finalize:\n\n"
        f"{FENCE}repl\nFINAL(result)\n{FENCE}\n"
    )
    assert extract_code_blocks(response) == ["result = sum(data)\nprint(result)", "FINAL(result)"]


def test_extract_unterminated_final_fence():
    assert extract_code_blocks(f"{FENCE}repl\nprint(1)\n") == ["print(1)"]
    reply = f"Look first.\n{FENCE}repl\nx = 1\n{FENCE}\nthen\n{FENCE}repl\nprint(x)\ny = 2"
    assert extract_code_blocks(reply) == ["x = 1", "print(x)\ny = 2"]


def test_extract_untagged_fallback_uses_heuristic():
    reply = f"{FENCE}\nx = 1\n{FENCE}\n{FENCE}\njust prose\n{FENCE}\n{FENCE}\nprint(2)\n{FENCE}"
    assert extract_code_blocks(reply) == ["x = 1", "print(2)"]
    for hint in ("import os", "def f(): pass", "class A: pass"):
        assert extract_code_blocks(f"{FENCE}\n{hint}\n{FENCE}") == [hint]


def test_tagged_blocks_win_over_untagged_and_other_languages_are_ignored():
    reply = (
        f"{FENCE}\nx = 1\n{FENCE}\n{FENCE}bash\nls = 1\n{FENCE}\n"
        f"{FENCE}py\nprint(3)\n{FENCE}\n{FENCE}REPL\nprint(4)\n{FENCE}"
    )
    assert extract_code_blocks(reply) == ["print(3)", "print(4)"]
    assert extract_code_blocks(f"{FENCE}bash\nx = 1\n{FENCE}") == []


def test_extract_custom_language_tag():
    reply = f"{FENCE}sandbox\nx = 1\n{FENCE}\n{FENCE}repl\ny = 2\n{FENCE}"
    assert extract_code_blocks(reply, language="sandbox") == ["x = 1"]


def test_extract_handles_closing_fence_on_code_line_and_unclosed_block_before_next():
    assert extract_code_blocks(f"{FENCE}repl\nprint(1){FENCE}\ntext") == ["print(1)"]
    reply = f"{FENCE}repl\nx = 1\n{FENCE}python\ny = 2\n{FENCE}"
    assert extract_code_blocks(reply) == ["x = 1", "y = 2"]


def test_extract_dedents_and_skips_empty_blocks():
    reply = f"1. step\n   {FENCE}repl\n   for i in range(2):\n       print(i)\n   {FENCE}\n{FENCE}repl\n\n{FENCE}"
    assert extract_code_blocks(reply) == ["for i in range(2):\n    print(i)"]


def test_extract_no_blocks():
    assert extract_code_blocks("No code here, only FINAL(42) in prose.") == []


# --- format_final_answer ---------------------------------------------------------------


def test_format_final_answer_spec_examples():
    assert format_final_answer("hello") == "hello"
    assert format_final_answer({"answer": 42}) == "42"
    assert format_final_answer({"key": "value", "count": 10}) == (
        '{\n  "key": "value",\n  "count": 10\n}'
    )
    assert format_final_answer(["line1", "line2"]) == "line1\nline2"
    assert format_final_answer(42) == "42"


def test_format_final_answer_other_types():
    assert format_final_answer({"ids": {1, 2}}) == '{\n  "ids": "{1, 2}"\n}'
    assert format_final_answer({"name": "Zoë"}) == '{\n  "name": "Zoë"\n}'
    assert format_final_answer(("a", "b")) == "('a', 'b')"
    assert format_final_answer(None) == "None"
    assert format_final_answer([1, [2]]) == "1\n[2]"


# --- FinalDetection --------------------------------------------------------------------


def test_final_detection_construction_and_defaults():
    d = FinalDetection(detected=True, final_type="direct", content="42", raw_match='FINAL("42")')
    assert (d.detected, d.final_type, d.content, d.raw_match) == (True, "direct", "42", 'FINAL("42")')
    empty = FinalDetection(detected=False)
    assert (empty.final_type, empty.content, empty.raw_match) == (None, None, None)
    assert [f.name for f in fields(FinalDetection)] == ["detected", "final_type", "content", "raw_match"]
    assert not hasattr(d, "__dict__")  # slots=True


# --- end-to-end flow and the spec's worked examples ------------------------------------


def test_end_to_end_code_block_flow():
    reply = f"Computing.\n{FENCE}repl\ntotal = sum(range(100))\nFINAL_VAR('total')\n{FENCE}"
    (code,) = extract_code_blocks(reply)
    assert detect_final_in_code(code).detected
    assert run_model_code(code, {"FINAL_VAR": FINAL_VAR}) == "4950"


def test_end_to_end_text_flow():
    det = detect_final_in_text("All done. FINAL(Paris)")
    assert det.detected and det.content == "Paris"


def test_example_basic_task_completion():
    code = (
        "data = [1, 2, 3, 4, 5]\ntotal = sum(data)\naverage = total / len(data)\n"
        'FINAL(f"The average is {average}")'
    )
    assert run_model_code(code, {"FINAL": FINAL}) == "The average is 3.0"


def test_example_variable_based_completion():
    code = (
        "import json\nresults = {}\nfor key in context.keys():\n"
        "    results[key] = analyze(context[key])\n"
        "final_report = json.dumps(results, indent=2)\nFINAL_VAR(\"final_report\")"
    )
    ns = {"FINAL_VAR": FINAL_VAR, "context": {"a": "xx", "b": "y"}, "analyze": len}
    assert run_model_code(code, ns) == '{\n  "a": 2,\n  "b": 1\n}'


def test_example_multi_step_with_sub_llm():
    calls: list[str] = []

    def llm_query(prompt: str) -> str:
        calls.append(prompt)
        return f"summary{len(calls)}"

    code = (
        "chunks = [context[i:i+1000] for i in range(0, len(context), 1000)]\n"
        "summaries = []\nfor chunk in chunks:\n"
        "    summaries.append(llm_query(f'Summarize: {chunk}'))\n"
        "combined = '\\n'.join(summaries)\n"
        "final_answer = llm_query(f'Synthesize these summaries: {combined}')\n"
        "FINAL(final_answer)"
    )
    ns = {"FINAL": FINAL, "llm_query": llm_query, "context": "z" * 2500}
    assert run_model_code(code, ns) == "summary4"
    assert len(calls) == 4 and calls[-1].startswith("Synthesize these summaries: summary1")


@pytest.mark.parametrize(("words", "expected"), [(5, "Document too short for meaningful analysis"),
                                                 (150, "detailed:150")])
def test_example_conditional_termination(words, expected):
    code = (
        "word_count = len(context.split())\nif word_count < 100:\n"
        "    FINAL('Document too short for meaningful analysis')\n"
        "analysis = perform_detailed_analysis(context)\nFINAL_VAR('analysis')"
    )
    ns = {"FINAL": FINAL, "FINAL_VAR": FINAL_VAR, "context": "w " * words,
          "perform_detailed_analysis": lambda c: f"detailed:{len(c.split())}"}
    assert run_model_code(code, ns) == expected


def test_detect_in_code_offsets_survive_unusual_line_breaks():
    code = 's = "a\x0cb\u2028c"\r\nx = 1\r\nFINAL_VAR("res")'
    r = detect_final_in_code(code)
    assert (r.final_type, r.content, r.raw_match) == ("variable", "res", 'FINAL_VAR("res")')
