"""End to end on the real embedded model: real documents, answers found by code.

Slow (each run is 10-40 s on 2 cores); ``pytest -m "not slow"`` skips them.
The questions are built from the running interpreter's standard library and
Debian's licence texts by :mod:`evals.questions`, with ``ast``/text search.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from evals.questions import (
    class_line_question,
    defines_function_question,
    licenses_dir,
    unique_line_question,
)
from rlm_kernel import RLM

pytestmark = pytest.mark.slow


def check(question, result):
    assert result.stopped_by == "final", (result.stopped_by, result.error)
    assert question.check(result.answer), f"expected {question.expected!r}, got {result.answer!r}"
    assert result.llm_calls >= 2 and result.prompt_tokens > 0 and result.completion_tokens > 0


def test_which_stdlib_file_defines_a_function():
    q = defines_function_question("json", random.Random(0))
    check(q, RLM(max_iterations=8).run(q.text, context=q.context))


def test_which_licence_contains_a_line():
    if not licenses_dir().is_dir():
        pytest.fail("/usr/share/common-licenses is missing (Debian's base-files provides it)")
    q = unique_line_question(random.Random(0))
    check(q, RLM(max_iterations=8).run(q.text, context=q.context))


def test_line_number_of_a_class_in_one_long_string():
    q = class_line_question("fractions.py", random.Random(0))
    res = RLM(max_iterations=8).run(q.text, context=q.context)
    check(q, res)
    assert any(word in e.code for e in res.history
               for word in ("search(", "code_outline(", "splitlines", "enumerate"))


def test_llm_query_reaches_the_real_sub_model():
    task = ("Call llm_query to ask: 'What is the capital of France? Answer with one word.' "
            "Then call FINAL with its reply.")
    res = RLM(max_iterations=4).run(task)
    assert res.stopped_by == "final"
    assert "paris" in (res.answer or "").lower()
    assert any(c.role == "sub" for c in res.calls)
    assert any(e.llm_calls for e in res.history)


def test_cli_json_on_a_stdlib_question():
    q = defines_function_question("email", random.Random(3))
    proc = subprocess.run(
        [sys.executable, "-m", "rlm_kernel.cli", "run", "--json", "--context", q.context_path,
         "--max-iterations", "8", q.text],
        capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert set(data) >= {"answer", "steps", "llm_calls", "prompt_tokens", "completion_tokens",
                         "cost_usd", "seconds", "stopped_by"}
    assert data["stopped_by"] == "final"
    assert q.check(data["answer"]), (q.expected, data["answer"])
    assert data["cost_usd"] == 0.0 and data["steps"] >= 1
