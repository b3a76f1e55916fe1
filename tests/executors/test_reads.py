"""The executed-reads record (:mod:`rlm_kernel.executors.reads`): what a step's
executor reports in ``REPLResult.names_read``, in both executors, and what the host
keeps of a worker's report (which model code may forge)."""

from __future__ import annotations

import pytest

from rlm_kernel.executors import PlainExecutor, close_executor, new_executor
from rlm_kernel.executors.isolated.executor import _names_read

WATCH = (frozenset({"context", "search"}), frozenset())


@pytest.fixture(scope="module", params=["in-process", "isolated"])
def executor(request):
    ex = new_executor(request.param)
    yield ex
    close_executor(ex)


def run(ex, code: str):
    ex.read_watch = WATCH
    try:
        return ex.execute(code, timeout=30)
    finally:
        ex.read_watch = None


def test_no_watch_no_record():
    assert PlainExecutor().execute("x = 1").names_read is None


def test_the_record_names_the_reads_that_ran(executor):
    executor.namespace["context"] = "hello"
    assert run(executor, "if False:\n    context\n_ = 'context'").names_read == frozenset()
    assert run(executor, "n = len(context)").names_read == {"context"}
    assert run(executor, "def f():\n    return context\n").names_read == frozenset()
    assert run(executor, "x = [context for _ in range(3)]").names_read == {"context"}
    executor.execute("def search(query, data=None):\n    return []")  # a data helper
    assert run(executor, "h = search('x', 'a\\nx')").names_read == {"search"}
    assert run(executor, "h = search('x')").names_read == {"search()"}


def test_a_step_reads_as_before_and_its_errors_show_the_models_lines(executor):
    executor.namespace["context"] = "hello"
    res = run(executor, "print(context.upper())\ny = context + 1")
    assert res.stdout == "HELLO\n" and not res.success
    assert "y = context + 1" in res.stderr and "TypeError" in res.stderr
    assert "__rlm_read__" not in res.stderr and res.names_read == {"context"}
    res = run(executor, "del context\nprint(context)")
    assert "NameError: name 'context' is not defined" in res.stderr
    res = run(executor, "x = (")  # does not compile: nothing ran, the error is shown
    assert "SyntaxError" in res.stderr and res.names_read == frozenset()


def test_the_host_keeps_only_watched_names_of_a_workers_report():
    """A worker's reply may be forged: names not watched, non-strings and a report
    that is not a list claim nothing, nor does a step without a reply."""
    reply = {"success": True, "reads": ["context", "other", 3, "search()", "x()"]}
    assert _names_read(reply, WATCH) == {"context", "search()"}
    assert _names_read({"success": True, "reads": "context"}, WATCH) == frozenset()
    assert _names_read({"success": True}, WATCH) == frozenset()
    assert _names_read(None, WATCH) == frozenset()  # the worker died: no read claimed
    assert _names_read(reply, None) is None
