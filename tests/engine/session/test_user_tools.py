"""The user's functions as tools (``RLM(tools=[...])``): described to the model, callable
from its code, put back when rebound, refused when not callable or reserved.
Scripted models: the loop's mechanics."""

from __future__ import annotations

import pytest

from rlm_kernel import RLM
from rlm_kernel.engine.session.task import check_tools, describe_tool
from tests.replies import block
from tests.scripted import scripted_rlm


def shout(text: str, times: int = 1) -> str:
    """Upper-case a text, ``times`` times over.

    A second paragraph the model is not told.
    """
    return text.upper() * times


def test_a_tool_is_described_and_called_from_model_code():
    rlm, _ = scripted_rlm([block("print(shout(context, times=2))"), block("FINAL(shout('ok'))")],
                          tools=[shout])
    res = rlm.run("Shout it.", context="hey")
    prompt = res.root_prompts[0][1]["content"]
    assert "Your own functions in the REPL" in prompt
    assert "- shout(text: str, times: int = 1) -> str: Upper-case a text, ``times`` times " \
           "over." in prompt
    assert "second paragraph" not in prompt
    assert res.history.entries[0].output.strip() == "HEYHEY"
    assert res.answer == "OK"


def test_tools_given_to_run_add_to_the_constructor_ones():
    def count(xs: list) -> int:
        """How many."""
        return len(xs)

    rlm, _ = scripted_rlm([block("FINAL(count(shout(context)))")], tools={"shout": shout})
    res = rlm.run("q", context="abc", tools=[count])
    assert res.answer == "3"


def test_a_rebound_tool_is_put_back_and_the_step_says_so():
    events = []
    rlm, _ = scripted_rlm([block("shout = None\nprint('x')"), block("FINAL(shout('a'))")],
                          tools=[shout], events=events)
    res = rlm.run("q", context="abc")
    assert "shout is the task's input and read-only" in res.history.entries[0].output
    assert any(e.kind == "step_notice" and e.reason == "restored" for e in events)
    assert res.answer == "A"


@pytest.mark.parametrize("tools, error, match", [
    ([42], TypeError, "has no name"),
    ({"x": 42}, TypeError, "'x' is not callable"),
    ({"llm_query": shout}, ValueError, "'llm_query' is reserved"),
    ({"search": shout}, ValueError, "'search' is reserved"),
    ({"not a name": shout}, ValueError, "not a Python identifier"),
])
def test_bad_tools_get_a_clear_error(tools, error, match):
    with pytest.raises(error, match=match):
        check_tools(tools)
    with pytest.raises(error, match=match):
        RLM(tools=tools)


def test_a_tool_without_a_signature_or_docstring_is_still_described():
    assert describe_tool("p", print).startswith("- p(")
    assert describe_tool("f", lambda: 1) == "- f()"
