"""Routing of cells in a real `rlm` kernel (no model needed: an unknown model fails fast)."""

from __future__ import annotations

import pytest

from tests.kernel_client import running


@pytest.fixture(scope="module")
def kc():
    """One rlm kernel for the module's routing tests (an unknown model fails fast)."""
    with running("rlm") as (_, client):
        client.execute_interactive("%config RLM.model = 'no-such-model-xyz'", timeout=30)
        yield client


def run(client, code: str) -> tuple[dict, str, str]:
    out: dict[str, list[str]] = {"stdout": [], "stderr": []}

    def hook(msg):
        if msg["msg_type"] == "stream":
            out[msg["content"]["name"]].append(msg["content"]["text"])
        elif msg["msg_type"] == "error":
            out["stderr"].append(msg["content"]["ename"] + ": " + msg["content"]["evalue"])

    reply = client.execute_interactive(code, timeout=60, output_hook=hook)
    return reply["content"], "".join(out["stdout"]), "".join(out["stderr"])


@pytest.mark.parametrize("text", ["Which chapter first mentions the whale?",
                                  "Count the lines that mention error."])
def test_prose_cell_becomes_a_task(kc, text):
    content, _, err = run(kc, "context = 'some text'\n")
    content, out, err = run(kc, text)
    assert content["status"] == "ok"
    assert "unknown model 'no-such-model-xyz'" in err  # it reached the RLM engine
    assert "not found" not in out  # not read as `whale?` help


def test_code_with_a_typo_is_still_a_syntax_error(kc):
    content, _, err = run(kc, "prnt('hi'")
    assert content["status"] == "error" and content["ename"] == "SyntaxError"


def test_prose_tasks_can_be_switched_off(kc):
    run(kc, "%config RLMKernel.prose_tasks = False")
    try:
        content, out, err = run(kc, "Which chapter first mentions the whale?")
        assert "unknown model" not in err  # not routed to the engine
        assert "whale" in out + err  # IPython read it as help for `whale`
    finally:
        run(kc, "%config RLMKernel.prose_tasks = True")


HINT = "Hint: to ask the model"


@pytest.mark.parametrize(("cell", "hinted"), [
    ("hello", True), ("Hello!", True), ("x = hello", False), ("my_var", False),
    ("contxt.upper()", False), ("1/0", False), ("hello2", False)])
def test_a_one_word_cell_that_fails_as_python_gets_a_hint(kc, cell, hinted):
    content, out, err = run(kc, cell)
    assert content["status"] == "error"  # the error is Python's, as before
    assert (HINT in out) is hinted, (cell, out)
    if hinted:
        assert "write the task as a sentence" in out and "%%rlm" in out
        assert len([line for line in out.splitlines() if line.strip()]) == 1  # one line


def test_a_step_that_fails_the_same_way_gets_no_hint(kernel):
    """Steps run as cells too: the hint is for the user's cells, never a step's (the model
    would read it)."""
    from tests.kernel_client import execute, script_model, text_of
    from tests.replies import block

    _, client = kernel
    script_model(client, [block("hello"), block("FINAL('done')")])
    execute(client, "context = 'some text'")
    reply, messages = execute(client, "%%rlm\nSay hello.")
    assert reply["content"]["status"] == "ok"
    assert HINT not in text_of(messages)
    reply, messages = execute(client, (
        "_r = list(get_ipython().magics_manager.registry['RLMMagics'].runs.values())[-1]\n"
        "print(_r.result.history.entries[0].output)"))
    seen = text_of(messages)  # what the model read of the step
    assert "NameError: name 'hello' is not defined" in seen and HINT not in seen


@pytest.mark.parametrize("kernel_name", ["python3"])
def test_in_a_python3_kernel_the_hint_names_the_magic(kernel):
    from tests.kernel_client import execute, text_of

    _, client = kernel
    execute(client, "%load_ext rlm_kernel")
    for cell in ("hello there", "hello"):
        reply, messages = execute(client, cell)
        assert reply["content"]["status"] == "error"
        assert "Hint: to ask the model, start the cell with %%rlm" in text_of(messages)
    reply, messages = execute(client, "print x")
    assert "Hint" not in text_of(messages)


@pytest.mark.parametrize(("text", "error", "hinted"), [
    ("hello", NameError("name 'hello' is not defined", name="hello"), True),
    ("hello there", SyntaxError("invalid syntax"), True),
    ("print the title of the book", SyntaxError("Missing parentheses"), True),
    ("print x", SyntaxError("Missing parentheses"), False),
    ("improt os", SyntaxError("invalid syntax"), False),
    ("retrun the value now", SyntaxError("invalid syntax"), False),
    ("x = hello", NameError("name 'hello' is not defined", name="hello"), False),
    ("hello world", NameError("name 'world' is not defined", name="world"), False),
    ("hello", ZeroDivisionError("no"), False),
    ("hello", None, False),
    ("foo(bar)", NameError("name 'foo' is not defined", name="foo"), False),
    ("first line\nsecond line", SyntaxError("invalid syntax"), False),
])
def test_which_failed_cells_read_as_prose(text, error, hinted):
    from rlm_kernel.jupyter.prose import prose_hint

    assert (prose_hint(text, error, prose_tasks=False) is not None) is hinted
    if hinted:
        assert "%%rlm" in prose_hint(text, error, prose_tasks=False)
        assert "sentence" in prose_hint(text, error, prose_tasks=True)
