"""``executors/worker.py``'s own functions, in this process (no worker started): the
codec error handler of the output pipes, the worker's stream, what a value becomes for
the host (data or a description), a host function's error rebuilt on this side, and
the error report of a step."""

from __future__ import annotations

import linecache
import os
import pickle

import pytest

from rlm_kernel.executors.wire import decode_value
from rlm_kernel.executors.worker import (
    ERRORS,
    HostFunction,
    _FdWriter,
    _host_error,
    current_namespace,
    data_or_description,
    describe,
    error_report,
)
from rlm_kernel.termination import FinalOutput


# -- the output pipes' codec error handler ------------------------------------------------
def test_a_lone_surrogate_round_trips_through_the_pipes_codec():
    text = "a\ud800b"
    data = text.encode("utf-8", ERRORS)
    assert data == b"a\xed\xa0\x80b"
    assert data.decode("utf-8", ERRORS) == text


def test_bytes_that_are_not_utf8_decode_to_the_replacement_character():
    assert b"ok\xff\xfeend".decode("utf-8", ERRORS) == "ok\ufffd\ufffdend"


# -- the worker's stdout/stderr ------------------------------------------------------------
@pytest.fixture()
def pipe():
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        try:
            os.close(fd)
        except OSError:
            pass


def test_the_stream_writes_text_straight_to_its_file_descriptor(pipe):
    read, write = pipe
    stream = _FdWriter(write, "<stdout>")
    assert stream.write("héllo \ud800\n") == 8
    assert stream.write("") == 0
    os.close(write)
    assert os.read(read, 100).decode("utf-8", ERRORS) == "héllo \ud800\n"
    assert (stream.fileno(), stream.isatty(), stream.encoding) == (write, False, "utf-8")


def test_the_stream_refuses_bytes_as_a_text_stream_does(pipe):
    with pytest.raises(TypeError, match="must be str, not bytes"):
        _FdWriter(pipe[1], "<stderr>").write(b"raw")


# -- values for the host -----------------------------------------------------------------
def test_plain_data_crosses_as_its_data_form():
    value = {"a": [1, 2.5, "x"], "b": None}
    sent = data_or_description(value)
    assert set(sent) == {"data"} and decode_value(sent["data"]) == value


def test_a_value_with_no_data_form_is_described_not_pickled():
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque thing>"

    sent = data_or_description(Opaque())
    assert set(sent) == {"description"}
    info = sent["description"]
    assert (info["type"], info["repr"], info["callable"]) == ("Opaque", "<opaque thing>", False)
    assert info["reason"] and "length" not in info


def test_a_description_gives_a_containers_length_and_a_functions_callability():
    info = describe([1, 2, 3], "too big")
    assert (info["type"], info["length"], info["reason"]) == ("list", 3, "too big")
    assert describe(len, "a function")["callable"] is True


def test_a_description_survives_a_repr_that_raises():
    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr for you")

    info = describe(Broken(), "why")  # no exception: a placeholder naming the type
    assert info["type"] == "Broken" and "Broken" in info["repr"]
    assert "no repr for you" not in info["repr"]


# -- host functions ----------------------------------------------------------------------
def test_a_host_function_asks_the_worker_to_call_the_host():
    calls = []

    class FakeWorker:
        def call_host(self, key, args, kwargs):
            calls.append((key, args, kwargs))
            return "answered"

    fn = HostFunction(FakeWorker(), 7, "llm_query", "Ask a model.")
    assert fn("p", model="m") == "answered"
    assert calls == [(7, ("p",), {"model": "m"})]
    assert repr(fn) == "<host function llm_query>" and fn.__doc__ == "Ask a model."


def test_a_host_error_of_a_builtin_type_is_rebuilt_as_that_type():
    err = _host_error({"type": "ValueError", "message": "bad value"})
    assert type(err) is ValueError and str(err) == "bad value"


def test_a_final_from_the_host_is_a_final_output_with_its_value():
    output = {"answer": 42, "type": "direct"}
    err = _host_error({"type": "FinalOutput", "output": pickle.dumps(output)})
    assert isinstance(err, FinalOutput) and err.output == output


@pytest.mark.parametrize("name", ["SystemExit", "KeyboardInterrupt", "BudgetExceeded"])
def test_other_host_errors_are_a_new_class_of_the_same_name(name):
    """Model code can catch them with ``except Exception`` (never a real SystemExit or
    KeyboardInterrupt, which would end the worker)."""
    err = _host_error({"type": name, "message": "stop", "module": "host.mod"})
    assert type(err).__name__ == name and type(err).__module__ == "host.mod"
    assert isinstance(err, Exception) and str(err) == "stop"


def test_a_base_only_host_error_is_not_caught_by_except_exception():
    err = _host_error({"type": "Stopped", "message": "", "base_only": True})
    assert isinstance(err, BaseException) and not isinstance(err, Exception)


# -- a step's error report -----------------------------------------------------------------
def _run_step(code: str, filename: str) -> BaseException:
    lines = code.splitlines(keepends=True)
    linecache.cache[filename] = (len(code), None, lines, filename)
    try:
        exec(compile(code, filename, "exec"), {})
    except Exception as exc:  # noqa: BLE001 - the step's error is the subject
        return exc
    raise AssertionError("the step did not fail")


def test_an_error_report_has_the_steps_frames_and_code():
    name = "<rlm-step-test-1>"
    exc = _run_step("def f(x):\n    return 1 / x\n\nf(0)\n", name)
    report = error_report(exc, name, "ZeroDivisionError: division by zero\n")
    assert (report["ename"], report["evalue"]) == ("ZeroDivisionError", "division by zero")
    assert [frame[1:] for frame in report["frames"]] == [[4, "<module>"], [2, "f"]]
    assert {frame[0] for frame in report["frames"]} == {name}
    assert report["sources"] == {name: "def f(x):\n    return 1 / x\n\nf(0)\n"}
    assert report["plain"] == "ZeroDivisionError: division by zero\n"
    assert "syntax" not in report


def test_a_syntax_errors_report_says_where_and_has_no_frames():
    name = "<rlm-step-test-2>"
    try:
        compile("x = (1,\n", name, "exec")
    except SyntaxError as exc:
        report = error_report(exc, name, "SyntaxError\n")
    file, line, _, _, _, _, message = report["syntax"]
    assert (file, line, report["frames"], report["ename"]) == (name, 1, [], "SyntaxError")
    assert "never closed" in message


def test_this_process_is_no_worker_so_it_has_no_worker_namespace():
    assert current_namespace() is None
