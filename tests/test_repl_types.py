"""Tests for rlm_kernel.repl_types: every example of the REPL-types spec, plus bounded-cost previews."""

from __future__ import annotations

import collections
import json
import time
from datetime import datetime

import pytest

from rlm_kernel.repl_types import REPLEntry, REPLHistory, REPLResult, REPLVariable

FENCE = "`" * 3


def best_seconds(fn, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


# --- REPLVariable: spec examples -------------------------------------------------------


def test_document_example_format():
    doc = "This is a very long document with thousands of words..."
    var = REPLVariable.from_value(
        name="document",
        value=doc,
        description="The input document to analyze",
        constraints="Read-only. Do not modify.",
    )
    # The spec's sample output says 54; the string has 55 characters, and we count exactly.
    assert var.total_length == len(doc) == 55
    assert var.format() == (
        "Variable: `document` (access it in your code)\n"
        "Type: str\n"
        "Description: The input document to analyze\n"
        "Constraints: Read-only. Do not modify.\n"
        "Total length: 55 characters\n"
        "Preview:\n"
        f"{FENCE}\n"
        "This is a very long document with thousands of words...\n"
        f"{FENCE}"
    )


def test_fields_defaults_and_class_constant():
    var = REPLVariable(name="v", type_name="int")
    assert (var.description, var.constraints, var.total_length, var.preview) == ("", "", 0, "")
    assert var.length_unit == "characters"
    assert REPLVariable.PREVIEW_LENGTH == 500
    assert not hasattr(var, "__dict__")  # slots=True


def test_from_value_spec_examples():
    var = REPLVariable.from_value("text", "Hello, world!")
    assert var.type_name == "str" and var.total_length == 13 and var.preview == "Hello, world!"
    var = REPLVariable.from_value(
        "config", {"model": "gpt-4o", "temperature": 0.7}, description="Model configuration"
    )
    assert var.type_name == "dict" and var.description == "Model configuration"
    var = REPLVariable.from_value("items", [1, 2, 3, 4, 5])
    assert var.type_name == "list"
    var = REPLVariable.from_value("large_text", "x" * 10000, preview_length=100)
    assert len(var.preview) <= 103
    assert var.preview == "x" * 100 + "..." and var.total_length == 10000


def test_default_preview_is_first_500_characters():
    text = "".join(chr(65 + i % 26) for i in range(45230))
    var = REPLVariable.from_value(name="context", value=text)
    assert var.type_name == "str" and var.total_length == 45230
    assert var.preview == text[:500] + "..."
    assert "Total length: 45,230 characters" in var.format()


def test_small_containers_use_indented_json_and_exact_character_count():
    value = {"model": "gpt-4o", "temperature": 0.7}
    expected = json.dumps(value, indent=2, default=str)
    var = REPLVariable.from_value("config", value)
    assert var.preview == expected
    assert (var.total_length, var.length_unit) == (len(expected), "characters")
    var = REPLVariable.from_value("items", [1, 2, 3, 4, 5])
    assert var.preview == json.dumps([1, 2, 3, 4, 5], indent=2)


def test_json_preview_truncated_with_ellipsis():
    value = {f"key{i}": "v" * 20 for i in range(100)}
    var = REPLVariable.from_value("big", value, preview_length=100)
    full = json.dumps(value, indent=2)
    assert var.preview == full[:100] + "..."
    assert (var.total_length, var.length_unit) == (100, "items")


def test_json_preview_matches_json_dumps_for_mixed_values():
    value = {"a": [1, 2.5, None, True, False], "b": {"c": "d", "e": []}, "f": {}, 3: "int key",
             None: "none key", "when": datetime(2024, 1, 15)}
    expected = json.dumps(value, indent=2, default=str, ensure_ascii=False)
    var = REPLVariable.from_value("mixed", value, preview_length=2000)
    assert var.preview == expected and var.total_length == len(expected)


def test_format_spec_layout_with_and_without_optional_lines():
    var = REPLVariable(
        name="context", type_name="str", description="Legal contract to analyze",
        constraints="Must not be modified", total_length=45230,
        preview="AGREEMENT made this 15th day of January, 2024, between...",
    )
    assert var.format() == (
        "Variable: `context` (access it in your code)\nType: str\n"
        "Description: Legal contract to analyze\nConstraints: Must not be modified\n"
        "Total length: 45,230 characters\nPreview:\n"
        f"{FENCE}\nAGREEMENT made this 15th day of January, 2024, between...\n{FENCE}"
    )
    bare = REPLVariable(name="x", type_name="int", total_length=2, preview="42").format()
    assert "Description" not in bare and "Constraints" not in bare
    assert bare.splitlines()[:3] == ["Variable: `x` (access it in your code)", "Type: int",
                                     "Total length: 2 characters"]


def test_metadata_is_small_for_a_large_document():
    var = REPLVariable.from_value("context", "word " * 20000, description="A long document")
    assert var.total_length == 100000
    assert len(var.format()) < 800  # a few hundred characters, not 100,000


def test_to_dict_has_all_fields():
    var = REPLVariable(name="context", type_name="str", description="Legal contract to analyze",
                       total_length=45230, preview="AGREEMENT made this 15th day...")
    assert var.to_dict() == {
        "name": "context", "type_name": "str", "description": "Legal contract to analyze",
        "constraints": "", "total_length": 45230, "preview": "AGREEMENT made this 15th day...",
        "length_unit": "characters",
    }


def test_preview_containing_a_fence_gets_a_longer_fence():
    var = REPLVariable.from_value("md", f"{FENCE}python\nx = 1\n{FENCE}")
    lines = var.format().splitlines()
    assert lines[-1] == FENCE + "`" and lines[lines.index("Preview:") + 1] == FENCE + "`"


# --- REPLVariable: bounded cost (deliberate difference) --------------------------------


@pytest.fixture(scope="module")
def huge_values():
    return {
        "str": "x" * (200 << 20),
        "list": list(range(10_000_000)),
        "dict": {f"k{i}": i for i in range(1_000_000)},
    }


@pytest.mark.parametrize("kind", ["str", "list", "dict"])
def test_from_value_cost_does_not_grow_with_value(huge_values, kind):
    value = huge_values[kind]
    seconds = best_seconds(lambda: REPLVariable.from_value("v", value))
    assert seconds < 0.05, f"{kind}: {seconds * 1000:.1f} ms looks O(n)"
    var = REPLVariable.from_value("v", value, preview_length=100)
    assert len(var.preview) <= 103 and var.preview.endswith("...")
    assert var.total_length == len(value)
    assert var.length_unit == ("characters" if kind == "str" else "items")


def test_container_length_reported_in_items(huge_values):
    text = REPLVariable.from_value("nums", huge_values["list"]).format()
    assert "Total length: 10,000,000 items" in text
    assert "Type: list" in text and "[\n  0,\n  1,\n  2," in text


def test_huge_item_inside_container_is_capped():
    value = [["y" * (100 << 20)], 1]
    seconds = best_seconds(lambda: REPLVariable.from_value("nested", value))
    var = REPLVariable.from_value("nested", value, preview_length=50)
    assert seconds < 0.05
    assert var.preview.startswith('[\n  [\n    "yyy') and len(var.preview) == 53
    assert (var.total_length, var.length_unit) == (2, "items")


def test_only_leading_items_are_formatted():
    calls = 0

    class Counted:
        def __str__(self) -> str:
            nonlocal calls
            calls += 1
            return "item"

    items = [Counted() for _ in range(100_000)]
    var = REPLVariable.from_value("objs", items)
    assert calls < 200 and var.total_length == 100_000 and '"item"' in var.preview


@pytest.mark.parametrize("kind", [tuple, set, frozenset, collections.deque])
def test_other_containers_preview_as_arrays(kind):
    var = REPLVariable.from_value("c", kind([7]))
    assert var.type_name == kind.__name__ and var.preview == "[\n  7\n]"


def test_circular_container_does_not_recurse_forever():
    loop: list = [1]
    loop.append(loop)
    var = REPLVariable.from_value("loop", loop)
    assert "circular" in var.preview


def test_objects_with_shape_report_rows_and_shape():
    class Frame:
        shape = (1_000_000, 3)

        def __str__(self) -> str:
            return "   a  b  c\n0  1  2  3\n..."

    var = REPLVariable.from_value("df", Frame())
    assert (var.type_name, var.total_length, var.length_unit) == ("Frame", 1_000_000, "rows")
    assert var.preview.startswith("shape: (1000000, 3)\n   a  b  c")
    assert "Total length: 1,000,000 rows" in var.format()

    class Vector:
        shape = (12,)

        def __str__(self) -> str:
            return "[0 1 2 ...]"

    var = REPLVariable.from_value("v", Vector())
    assert (var.total_length, var.length_unit) == (12, "items")


def test_bytes_big_ints_and_failing_str():
    var = REPLVariable.from_value("raw", b"\x00" * (50 << 20), preview_length=20)
    assert (var.total_length, var.length_unit) == (50 << 20, "bytes")
    assert len(var.preview) == 23

    assert REPLVariable.from_value("n", 42).preview == "42"
    big = REPLVariable.from_value("big", 10**5000)
    assert big.preview.startswith("<int of")

    class Broken:
        def __str__(self) -> str:
            raise RuntimeError("boom")

    assert "Broken object" in REPLVariable.from_value("b", Broken()).preview


def test_negative_preview_length_rejected():
    with pytest.raises(ValueError, match="preview_length"):
        REPLVariable.from_value("x", "abc", preview_length=-1)


def test_zero_preview_length():
    assert REPLVariable.from_value("x", "abc", preview_length=0).preview == "..."


# --- REPLEntry -------------------------------------------------------------------------


def test_entry_spec_example_format():
    entry = REPLEntry(
        reasoning="I need to count the words in the document",
        code="word_count = len(document.split())\nprint(word_count)",
        output="1523",
        execution_time=0.05,
        llm_calls=[{"prompt": "...", "response": "..."}],
    )
    assert entry.format(index=1) == (
        "[Step 1]\nReasoning: I need to count the words in the document\nCode:\n"
        f"{FENCE}python\nword_count = len(document.split())\nprint(word_count)\n{FENCE}\n"
        f"Output:\n{FENCE}\n1523\n{FENCE}\n(Made 1 sub-LLM call(s))"
    )


def test_entry_defaults_timestamp_and_sections_omitted():
    entry = REPLEntry()
    assert (entry.reasoning, entry.code, entry.output, entry.execution_time, entry.llm_calls) == (
        "", "", "", 0.0, [])
    stamp = datetime.fromisoformat(entry.timestamp)
    assert stamp.utcoffset() is not None and stamp.utcoffset().total_seconds() == 0
    assert entry.format() == "[Step]"
    assert REPLEntry(code="x = 1").format(3) == f"[Step 3]\nCode:\n{FENCE}python\nx = 1\n{FENCE}"
    assert REPLEntry().llm_calls is not REPLEntry().llm_calls


def test_entry_long_output_cut_in_the_middle_with_the_one_marker():
    entry = REPLEntry(output="a" * 2000 + "b" * 500)
    kept = "a" * 1333 + " [... 500 characters cut: print less ...] " + "a" * 167 + "b" * 500
    assert entry.format(1) == f"[Step 1]\nOutput:\n{FENCE}\n{kept}\n{FENCE}"
    assert entry.output.endswith("b")  # the full output stays on the entry
    assert "characters cut" not in REPLEntry(output="a" * 2000).format(1)


def test_entry_to_dict():
    entry = REPLEntry(reasoning="r", code="c", output="o", execution_time=1.5,
                      llm_calls=[{"prompt": "p"}])
    data = entry.to_dict()
    assert data == {"reasoning": "r", "code": "c", "output": "o", "execution_time": 1.5,
                    "llm_calls": [{"prompt": "p"}], "timestamp": entry.timestamp,
                    "names_read": None}
    data["llm_calls"][0]["prompt"] = "changed"
    assert entry.llm_calls[0]["prompt"] == "p"


# --- REPLHistory -----------------------------------------------------------------------


def test_history_spec_example_append_chain():
    history = REPLHistory()
    assert len(history) == 0
    history = history.append(reasoning="First, I'll check the data shape",
                             code="print(len(context))", output="15234", execution_time=0.01)
    assert len(history) == 1
    history = history.append(reasoning="Now I'll analyze the first section",
                             code="section = context[:1000]\nprint(section[:100])",
                             output="The quick brown fox...", execution_time=0.02)
    assert len(history) == 2
    new_history = history.append(reasoning="Calculate the average",
                                 code="avg = sum(values) / len(values)\nprint(avg)",
                                 output="42.5", execution_time=0.003,
                                 llm_calls=[{"prompt": "...", "response": "..."}])
    assert len(new_history) == 3 and new_history.entries[-1].llm_calls == [
        {"prompt": "...", "response": "..."}]


def test_history_append_does_not_modify_original():
    history = REPLHistory()
    history.append(reasoning="...", code="...", output="...")  # result discarded: a bug
    assert len(history) == 0
    one = history.append(code="x = 1")
    two = one.append(code="y = 2")
    assert len(one) == 1 and len(two) == 2 and one.entries is not two.entries


def test_history_append_is_keyword_only():
    with pytest.raises(TypeError):
        REPLHistory().append("reasoning")  # type: ignore[misc]


def test_history_format_empty_and_full():
    assert REPLHistory().format() == "(No prior steps)"
    history = REPLHistory().append(code="a = 1").append(code="b = 2")
    text = history.format(max_entries=5)
    assert "Showing" not in text and text.startswith("[Step 1]") and "[Step 2]" in text


def test_history_sliding_window_numbers_steps_globally():
    history = REPLHistory()
    for i in range(25):
        history = history.append(code=f"step_{i + 1} = True")
    text = history.format()
    assert text.startswith("(Showing last 10 of 25 steps)")
    assert "[Step 15]" not in text and "[Step 16]" in text and "[Step 25]" in text
    assert "step_16 = True" in text and "step_15 = True" not in text
    assert history.format(max_entries=0) == "(Showing last 0 of 25 steps)"
    assert history.format(max_entries=-3) == "(Showing last 0 of 25 steps)"


def test_history_to_list_and_json():
    history = REPLHistory().append(reasoning="r", code="c", output="o", execution_time=0.1)
    data = history.to_list()
    assert data[0]["code"] == "c" and json.loads(json.dumps(data, indent=2)) == data


def test_history_dunders():
    history = REPLHistory()
    assert not history and len(history) == 0
    history = history.append(code="x = 1", output="")
    assert history and len(history) == 1
    assert [entry.code for entry in history] == ["x = 1"]


# --- REPLResult ------------------------------------------------------------------------


def test_result_spec_example_to_dict():
    result = REPLResult(stdout="42\n", stderr="", locals={"x": 42, "data": [1, 2, 3]},
                        execution_time=0.15, llm_calls=[], success=True, final_output=None)
    assert result.to_dict() == {
        "stdout": "42\n", "stderr": "", "locals": {"x": "42", "data": "[1, 2, 3]"},
        "execution_time": 0.15, "llm_calls": [], "success": True, "final_output": None,
    }


def test_result_defaults():
    result = REPLResult()
    assert (result.stdout, result.stderr, result.locals, result.execution_time,
            result.llm_calls, result.success, result.final_output) == ("", "", {}, 0.0, [],
                                                                       True, None)


def test_result_locals_truncated_to_200_characters_cheaply(huge_values):
    result = REPLResult(locals={"s": "y" * 1000, "big": huge_values["list"],
                                "d": huge_values["dict"], "greeting": "Hello, world!"})
    seconds = best_seconds(result.to_dict)
    data = result.to_dict()["locals"]
    assert seconds < 0.05
    assert data["s"] == "y" * 200 and data["greeting"] == "Hello, world!"
    assert len(data["big"]) == 200 and data["big"].startswith("[0, 1, 2, 3")
    assert len(data["d"]) == 200 and data["d"].startswith('{"k0": 0, "k1": 1')


def test_result_examples_and_final_output_check():
    ok = REPLResult(stdout="Hello, world!\n", stderr="", locals={"greeting": "Hello, world!"},
                    execution_time=0.001, success=True)
    failed = REPLResult(stdout="", stderr="NameError: name 'undefined_var' is not defined",
                        locals={}, execution_time=0.001, success=False)
    direct = REPLResult(locals={"answer": 42}, execution_time=0.005, success=True,
                        final_output={"answer": 42, "type": "direct"})
    by_var = REPLResult(locals={"answer": 42}, final_output={"var": "answer", "type": "variable"})
    assert ok.final_output is None and not failed.success

    def answer_of(result: REPLResult):
        if result.final_output is None:
            return None
        if result.final_output["type"] == "direct":
            return result.final_output["answer"]
        return result.locals[result.final_output["var"]]

    assert [answer_of(r) for r in (ok, failed, direct, by_var)] == [None, None, 42, 42]


# --- the spec's complete-interaction example -------------------------------------------


def test_building_a_complete_interaction():
    context = "A very long document..." * 1000
    var = REPLVariable.from_value(name="context", value=context,
                                  description="Research paper to analyze")
    history = REPLHistory()
    history = history.append(reasoning="First, I'll check the length of the context",
                             code="print(f'Context length: {len(context)}')",
                             output="Context length: 25000", execution_time=0.01)
    history = history.append(reasoning="Now I'll find key terms",
                             code="words = context.split()\nprint(f'Word count: {len(words)}')",
                             output="Word count: 4167", execution_time=0.02)
    prompt = f"\n{var.format()}\n\nPrevious steps:\n{history.format()}\n\nWhat should you do next?\n"
    assert "Total length: 23,000 characters" in prompt
    assert "[Step 1]" in prompt and "[Step 2]" in prompt and "Word count: 4167" in prompt
    assert len(prompt) < 2000  # metadata, not the 23,000-character document
    assert json.loads(json.dumps(history.to_list()))[1]["output"] == "Word count: 4167"
    assert var.to_dict()["total_length"] == len(context)
