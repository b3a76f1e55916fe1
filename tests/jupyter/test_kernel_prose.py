"""Routing of cells in a real `rlm` kernel (no model needed: an unknown model fails fast)."""

from __future__ import annotations

import pytest
from jupyter_client.manager import start_new_kernel


@pytest.fixture(scope="module")
def kc():
    km, client = start_new_kernel(kernel_name="rlm", startup_timeout=60)
    client.execute_interactive("%config RLM.model = 'no-such-model-xyz'", timeout=30)
    yield client
    client.stop_channels()
    km.shutdown_kernel(now=True)


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
