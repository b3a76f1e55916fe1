"""Fault cases of ``../shared/fault-cases-t5/`` on secrets (y13, y14) and their siblings:
every way a run's text leaves the process (``result.error``, ``summary()``,
``to_dict()``, ``rlm run --json`` and its text, the events the CLI and the notebook
show, the exported notebook and rlm JSONL, the batch results file, the OTLP spans)
carries no secret the process knows (the environment's keys, a fleet's keys whatever
the variable holding them is called, a client's ``api_key``), and the worker's
environment is an allow-list (a variable with an innocent name stays out).

Each secret is a fresh value per test (the process remembers every secret it has seen,
so the names in ``[redacted NAME]`` may come from an earlier test; the assertions look
for the value and for the ``[redacted`` marker that shows the text was there).  Real
parts throughout: litellm against a local HTTP server that answers 401 quoting the key
it was sent, as providers' errors do; an OTLP/HTTP receiver on 127.0.0.1 decoding what
OpenTelemetry's exporter sends; a Dask ``LocalCluster`` for the batch; the isolated
executor's sandbox for the environment.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from bench.openai_stub import send_ok, serve_http
from rlm_kernel import RLM
from rlm_kernel.cli import main
from rlm_kernel.executors import EXECUTOR_KINDS
from rlm_kernel.models import LiteLLMClient, LLMError, trace_export, tracing
from tests.replies import block
from tests.scripted import scripted_rlm

from .helpers import THOUGHT

pytestmark = pytest.mark.timeout(300)

OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                  "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
                  "OTEL_TRACES_EXPORTER", "OTEL_SDK_DISABLED")


def fresh_key(label: str) -> str:
    """A secret value no other test uses."""
    return f"sk-t5-{label}-{uuid.uuid4().hex}"


def leaks(key: str, *texts: Any) -> list[str]:
    """The texts (as their ``repr``, so every field of a result or event counts) that
    hold ``key``."""
    return [repr(t)[:200] for t in texts if key in (t if isinstance(t, str) else repr(t))]


# -- a provider that quotes the key it was sent -------------------------------------------
@dataclass
class KeyEcho:
    """A chat-completions server on 127.0.0.1 that answers every request with 401 and
    ``Incorrect API key provided: <the key>`` (``seen``: the keys it was sent)."""

    api_base: str
    seen: list[str] = field(default_factory=list)


@contextmanager
def key_echo() -> Iterator[KeyEcho]:
    got = KeyEcho("")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            self.rfile.read(int(self.headers.get("content-length", 0)))
            key = self.headers.get("authorization", "").removeprefix("Bearer ")
            with lock:
                got.seen.append(key)
            body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}",
                                         "type": "invalid_request_error",
                                         "code": "invalid_api_key"}}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = serve_http(Handler)
    got.api_base = f"http://127.0.0.1:{httpd.server_port}/v1"
    try:
        yield got
    finally:
        httpd.shutdown()
        httpd.server_close()


def fleet(api_base: str, api_key: str) -> dict[str, Any]:
    """One deployment ``m`` at ``api_base`` whose ``api_key`` is ``api_key`` (a literal
    or ``os.environ/NAME``), no retries."""
    return {"model_list": [{"model_name": "m", "litellm_params": {
        "model": "openai/gpt-4o-mini", "api_base": api_base, "api_key": api_key}}],
        "router_settings": {"num_retries": 0, "allowed_fails": 1000, "cooldown_time": 0}}


def fleet_file(folder: Path, api_base: str, api_key: str) -> Path:
    path = folder / "fleet.yaml"
    path.write_text(json.dumps(fleet(api_base, api_key)))  # JSON is YAML
    return path


FLEET_KEYS = {
    "literal": lambda key, mp: key,
    "innocent variable": lambda key, mp: (mp.setenv("LLM_CREDS", key), "os.environ/LLM_CREDS")[1],
    "key-named variable": lambda key, mp: (mp.setenv("T5_SECRETS_API_KEY", key),
                                           "os.environ/T5_SECRETS_API_KEY")[1],
}


# -- y13 ----------------------------------------------------------------------------------
@pytest.mark.parametrize("how", FLEET_KEYS)
def test_y13_a_fleet_key_quoted_by_the_provider_is_in_no_record(how, monkeypatch):
    """Case y13_fleet_key_in_errors: a fleet's deployment carries its key literally, or
    as ``os.environ/NAME`` of a variable named innocently (``LLM_CREDS``) or like a key;
    the server answers 401 quoting the key.  Claim: the key is in no record of the run:
    ``result.error``, the calls' errors, ``summary()``, ``to_dict()``, the events, the
    result's every field; the error still says what went wrong (``[redacted ...]``)."""
    key = fresh_key("y13")
    events: list[Any] = []
    with key_echo() as server:
        api_key = FLEET_KEYS[how](key, monkeypatch)
        res = RLM(model="m", router=fleet(server.api_base, api_key), max_iterations=1,
                  executor="in-process", verify_answer=False,
                  observer=events.append).run("question", context="data")
    assert key in server.seen  # the key really went out, and came back in the error
    assert res.stopped_by == "error" and "HTTP 401" in res.error
    assert "[redacted " in res.error and any("[redacted " in (c.error or "") for c in res.calls)
    assert not leaks(key, res, res.error, json.dumps(res.summary()),
                     json.dumps(res.to_dict(), default=str), *events)


@pytest.mark.parametrize("as_json", [True, False], ids=["--json", "text"])
def test_y13_rlm_run_shows_a_fleet_file_s_literal_key_nowhere(as_json, tmp_path, capfd):
    """Case y13 through the command line: ``rlm run --router FLEET.yaml`` with the key
    written in the file.  Claim: neither ``--json``'s object nor the text output (the
    answer line, the error line, the step printout) nor anything on stderr holds it."""
    key = fresh_key("y13cli")
    with key_echo() as server:
        path = fleet_file(tmp_path, server.api_base, key)
        args = ["run", "--router", str(path), "--model", "m", "--executor", "in-process",
                "--max-iterations", "1", "question"]
        code = main(args[:1] + ["--json"] + args[1:] if as_json else args)
    out, err = capfd.readouterr()
    assert key in server.seen and code == 1
    if as_json:
        data = json.loads(out)
        assert data["stopped_by"] == "error" and "[redacted " in data["error"]
    else:
        assert "[redacted " in out + err
    assert not leaks(key, out, err)


def test_a_client_s_own_api_key_is_a_secret_too(capfd):
    """Sibling: the key given to a client in code (``LiteLLMClient(api_key=...)``, the
    settings of a run that builds its own client), not in any variable."""
    key = fresh_key("client")
    with key_echo() as server:
        client = LiteLLMClient("openai/gpt-4o-mini", api_base=server.api_base, api_key=key,
                               num_retries=0)
        res = RLM(root_client=client, sub_client=client, max_iterations=1,
                  executor="in-process", verify_answer=False).run("q", context="data")
        with pytest.raises(LLMError) as raised:
            client.complete([{"role": "user", "content": "hi"}])
    assert key in server.seen and "[redacted " in res.error
    assert not leaks(key, res, res.summary(), str(raised.value), *capfd.readouterr())


# -- y14 ----------------------------------------------------------------------------------
@dataclass
class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: the raw request bodies and the decoded
    spans (name, attributes, events with their attributes, status)."""

    url: str
    bodies: list[bytes] = field(default_factory=list)
    spans: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture()
def receiver(monkeypatch) -> Iterator[Receiver]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setitem(tracing._state, "provider", None)
    trace_export.reset()
    got, lock = Receiver(""), threading.Lock()

    def text(value: Any) -> str:
        return str(getattr(value, value.WhichOneof("value"))) if value.WhichOneof("value") \
            else ""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server API
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            with lock:
                got.bodies.append(body)
                for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
                    for scope in rs.scope_spans:
                        for sp in scope.spans:
                            got.spans.append({
                                "name": sp.name,
                                "attributes": {a.key: text(a.value) for a in sp.attributes},
                                "events": [(e.name, {a.key: text(a.value)
                                                     for a in e.attributes})
                                           for e in sp.events],
                                "status": (sp.status.code, sp.status.message)})
            send_ok(self, ExportTraceServiceResponse().SerializeToString(),
                    "application/x-protobuf")

    httpd = serve_http(Handler)
    got.url = f"http://127.0.0.1:{httpd.server_port}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", got.url)
    try:
        yield got
    finally:
        tracing.disable()
        trace_export.reset()
        httpd.shutdown()
        httpd.server_close()


def _failing_sub_call_run(key: str, **settings: Any) -> Any:
    """A scripted run whose question holds ``key`` and whose one sub-call fails with a
    provider error quoting it (the model code catches it and answers)."""
    rlm, _ = scripted_rlm(
        [block("try:\n    llm_query('check the key')\nexcept Exception as e:\n"
               "    print('sub-call failed:', e)", THOUGHT), block("FINAL('rotate it')")],
        sub_replies=[LLMError(f"AuthenticationError: Incorrect API key provided: {key}")],
        executor="in-process", **settings)
    return rlm.run(f"Why is my key {key} refused?", context="logs")


def test_y14_spans_sent_over_otlp_carry_no_key(receiver, monkeypatch):
    """Case y14_otel_span_secret: ``OPENAI_API_KEY`` set, OTLP tracing on, the key in the
    question and in a sub-call's error.  Claim: the spans that leave (``rlm.question``,
    the chat span's ``exception`` event with its message and stacktrace, the status
    message) hold no byte of it, and still say what happened (redacted)."""
    key = fresh_key("y14")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    res = _failing_sub_call_run(key, callbacks="otel")
    assert res.answer == "rotate it"
    raw = b"".join(receiver.bodies)
    assert receiver.spans and key.encode() not in raw
    [agent] = [s for s in receiver.spans if s["name"] == "invoke_agent rlm"]
    assert agent["attributes"]["rlm.question"] == \
        "Why is my key [redacted OPENAI_API_KEY] refused?"
    [failed] = [s for s in receiver.spans if s["events"]]
    [(name, attrs)] = failed["events"]
    assert name == "exception" and attrs["exception.type"] == "LLMError"
    assert "[redacted OPENAI_API_KEY]" in attrs["exception.message"]
    assert "Traceback" in attrs["exception.stacktrace"] and \
        "[redacted OPENAI_API_KEY]" in attrs["exception.stacktrace"]
    code, message = failed["status"]
    assert code == 2 and "[redacted OPENAI_API_KEY]" in message  # STATUS_CODE_ERROR


def test_the_exporter_redacts_spans_this_package_did_not_make(receiver):
    """Sibling: a library's own span under the provider made from the OTLP variables
    (OpenTelemetry's default recording of an escaping exception, unredacted at the
    source) is redacted by the exporter it goes through."""
    from opentelemetry.trace import Status, StatusCode

    key = fresh_key("lib")
    from rlm_kernel.redaction import remember_secret

    remember_secret(key, "LIB_TOKEN")
    tracer = trace_export.env_tracer_provider().get_tracer("some.library")
    with pytest.raises(RuntimeError), tracer.start_as_current_span(
            f"call {key}", attributes={"lib.key": key, "lib.list": [key, "x"]}) as sp:
        sp.add_event("note", {"detail": f"sent {key}"})
        sp.set_status(Status(StatusCode.ERROR, f"refused {key}"))
        raise RuntimeError(f"refused {key}")
    assert trace_export.flush()
    assert receiver.spans and key.encode() not in b"".join(receiver.bodies)
    [span] = receiver.spans
    assert span["name"] == "call [redacted LIB_TOKEN]"
    assert span["attributes"]["lib.key"] == "[redacted LIB_TOKEN]"
    assert [e[0] for e in span["events"]] == ["note", "exception"]


def test_spans_of_a_provider_the_user_set_up_are_redacted_at_the_source(exporter,
                                                                      monkeypatch):
    """Sibling of y14: with the user's own tracer provider (their exporter, not ours),
    the spans a run opens are redacted as they are written: attributes, the exception
    event, the status; the exception event is still there."""
    key = fresh_key("own")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    _failing_sub_call_run(key, callbacks="otel")
    spans = exporter.get_finished_spans()
    texts = [repr(dict(s.attributes)) + repr([(e.name, dict(e.attributes)) for e in s.events])
             + repr(s.status.description) + s.name for s in spans]
    assert spans and not leaks(key, *texts)
    [failed] = [s for s in spans if s.events]
    assert failed.status.status_code.name == "ERROR"
    assert "[redacted OPENAI_API_KEY]" in failed.events[0].attributes["exception.message"]


# -- siblings: tools, model code, the question -----------------------------------------------
@pytest.mark.parametrize("kind", EXECUTOR_KINDS)
def test_a_key_in_a_tool_s_error_is_in_no_record(kind, monkeypatch):
    """Sibling: one of the user's tools fails with an error quoting the key (the tool
    runs on the host, where the key is).  Claim: the step's output, the result and the
    events show it redacted."""
    key = fresh_key("tool")
    monkeypatch.setenv("SERVICE_API_KEY", key)

    def lookup(name: str) -> str:
        """Look a name up in the service."""
        raise PermissionError(f"the service refused key {key}")

    events: list[Any] = []
    rlm, _ = scripted_rlm([block("print(lookup('x'))", THOUGHT), block("FINAL('no')")],
                          executor=kind, events=events, tools=[lookup])
    res = rlm.run("Look x up.", context="data")
    assert "PermissionError" in res.history.entries[0].output
    assert "[redacted " in res.history.entries[0].output
    assert not leaks(key, res, res.to_dict(), *events)


@pytest.mark.parametrize("kind", EXECUTOR_KINDS)
def test_a_key_in_an_exception_model_code_raises_is_in_no_record(kind, monkeypatch):
    """Sibling: the user's data holds a key (a config file given as context) and model
    code raises an exception whose message is that data; in-process model code also
    raises one quoting ``os.environ`` (which it has, by design).  Claim: the
    trajectory, the result, the events and the JSON hold it redacted."""
    key = fresh_key("raise")
    monkeypatch.setenv("DEPLOY_TOKEN", key)
    events: list[Any] = []
    code = ("import os\nprint('env:', os.environ.get('DEPLOY_TOKEN'))\n"
            "raise ValueError('bad config: ' + context)")
    rlm, _ = scripted_rlm([block(code, THOUGHT), block("FINAL('fixed')")],
                          executor=kind, events=events)
    res = rlm.run("Check the config.", context=f"token = {key}")
    output = res.history.entries[0].output
    assert "ValueError: bad config: token = [redacted " in output
    assert not leaks(key, res, res.to_dict(), json.dumps(res.summary()), *events)


def test_a_key_in_the_question_is_in_no_record_and_not_in_the_cli_s_text(monkeypatch,
                                                                           capfd):
    """Sibling: the user pastes the key into the question.  Claim: the result's
    question, ``to_dict()``, the events (``run_started``) and a child run's line in
    the CLI's printout (``↳ sub-run: ...``) show it redacted; the model is sent it
    redacted."""
    from rlm_kernel.cli.run import StepPrinter

    key = fresh_key("question")
    monkeypatch.setenv("PASTED_API_KEY", key)
    events: list[Any] = []
    printer = StepPrinter()
    rlm, lm = scripted_rlm(
        [block("print(rlm_query('Is ' + 'this key valid? ' + __import__('os').environ.get("
               "'PASTED_API_KEY', 'unset')))", THOUGHT),
         block("FINAL('no')"), block("FINAL('no')")],
        executor="in-process", events=events, max_depth=1)
    rlm.observer = lambda e: (events.append(e), printer(e))
    res = rlm.run(f"Is {key} a valid key?", context="data")
    out, err = capfd.readouterr()
    sent = json.dumps(lm.calls)
    assert res.question.startswith("Is [redacted ")
    assert "sub-run: Is this key valid? [redacted " in out
    assert not leaks(key, res, res.to_dict(), *events, out, err, sent)


# -- siblings: the exported notebook and rlm log ----------------------------------------------
def test_the_exported_notebook_and_rlm_log_hold_no_key(tmp_path, monkeypatch):
    """Sibling: a run whose question, step output, sub-call error and the kernel's own
    step outputs (given to the export as they were shown) hold a key.  Claim: the
    ``.ipynb`` (cells, outputs, metadata) and the rlm ``.jsonl`` hold it nowhere."""
    from rlm_kernel.export import export_rlm_log, export_run

    key = fresh_key("export")
    monkeypatch.setenv("EXPORT_SECRET", key)
    res = _failing_sub_call_run(key)
    kernel_outputs = [[{"output_type": "stream", "name": "stdout", "text": f"shown {key}\n"}]]
    export_run(res, tmp_path / "run.ipynb", step_outputs=kernel_outputs,
               setup_cells=[f"context = {key!r}"])
    export_rlm_log(res, tmp_path / "run.jsonl")
    notebook = (tmp_path / "run.ipynb").read_text()
    log = (tmp_path / "run.jsonl").read_text()
    assert "[redacted " in notebook and "[redacted " in log
    assert key not in notebook and key not in log


# -- siblings: the batch results file -----------------------------------------------------------
def test_a_batch_row_s_error_in_the_results_file_holds_no_key(tmp_path, capfd):
    """Sibling: ``rlm batch`` on a Dask cluster of one worker process, with a fleet file
    whose literal key the provider quotes in its 401.  Claim: the task's result line
    (its error), the exported notebook and the batch's messages hold it redacted."""
    from distributed import Client, LocalCluster

    key = fresh_key("batch")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t1", "question": "Say hi."}) + "\n")
    out = tmp_path / "results.jsonl"
    with key_echo() as server, LocalCluster(n_workers=1, threads_per_worker=1,
                                            processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        path = fleet_file(tmp_path, server.api_base, key)
        code = main(["batch", str(tasks), "--out", str(out), "--cluster",
                     client.scheduler.address, "--router", str(path), "--model", "m",
                     "--executor", "in-process", "--max-iterations", "1", "--no-progress",
                     "--export", str(tmp_path / "nb")])
    [line] = [json.loads(t) for t in out.read_text().splitlines()]
    assert key in server.seen and code == 1
    assert line["id"] == "t1" and "[redacted " in line["error"]
    notebook = (tmp_path / "nb" / "t1.ipynb").read_text()
    assert not leaks(key, out.read_text(), notebook, *capfd.readouterr())


# -- siblings: the worker's environment -----------------------------------------------------------
def test_a_variable_with_an_innocent_name_is_not_in_the_worker(tmp_path, monkeypatch):
    """Sibling (kept back in t5: "a database password variable passes"): the host has
    ``DB_PASS`` and ``SERVICE_URL`` (a password inside a URL), names no key filter
    would catch.  Claim: the isolated worker and the commands its working folder runs
    (``bash``) have neither; ``HOME`` is the sandbox's ``/tmp``; a variable the user
    names in ``RLM_PASS_ENV`` passes (to both).  The in-process executor runs model code
    in the host's process and has the host's environment by design (not tested here)."""
    password, url = fresh_key("dbpass"), f"postgres://app:{fresh_key('url')}@db:5432/x"
    monkeypatch.setenv("DB_PASS", password)
    monkeypatch.setenv("SERVICE_URL", url)
    monkeypatch.setenv("DB_HOST", "db.internal.example")
    monkeypatch.setenv("RLM_PASS_ENV", "DB_HOST")
    code = ("import os, json\nprint('names', json.dumps(sorted(os.environ)))\n"
            "print('home', os.environ.get('HOME'))\nprint('host', os.environ.get('DB_HOST'))\n"
            "print(bash('env'))")
    rlm, _ = scripted_rlm([block(code, THOUGHT), block("FINAL('done')")],
                          executor="isolated", workdir=str(tmp_path))
    res = rlm.run("Show the environment.")
    output = res.history.entries[0].output
    assert res.history.entries[0].code and "names" in output, output
    names = json.loads(output.split("names ", 1)[1].splitlines()[0])
    assert "DB_PASS" not in names and "SERVICE_URL" not in names
    assert "home /tmp" in output and "host db.internal.example" in output
    assert "DB_HOST=db.internal.example" in output and "HOME=/tmp" in output  # bash's env
    assert password not in output and url not in output
    assert "DB_PASS" not in output.split("names", 1)[1]


# -- z17: a folder model code wrote, read back as context -----------------------------------------
def test_z17_a_link_model_code_left_in_a_folder_is_not_followed_out_of_it(tmp_path, caplog):
    """Case z17_context_folder_symlink_out: in a first run with a working folder, model
    code leaves symbolic links there: ``notes.txt`` to a key outside the folder (as root
    it was ``/etc/shadow``, as a user ``~/.ssh/id_ed25519``) and ``keys`` to the key's
    folder; the user then gives the same folder as ``--context`` (``load_contexts``,
    which runs in the host's process, outside the wall).  The links out are skipped,
    with a warning naming each, and the key reaches no run; a link that stays in the
    folder (``same.md`` to ``README.md``) is still followed."""
    from rlm_kernel.context import load_contexts

    outside, work = tmp_path / "home", tmp_path / "work"
    outside.mkdir()
    work.mkdir()
    key = fresh_key("z17")
    (outside / "id_ed25519").write_text(f"-----BEGIN OPENSSH PRIVATE KEY----- {key}\n")
    (work / "README.md").write_text("project readme\n")
    plant = (f"import os\nos.symlink({str(outside / 'id_ed25519')!r}, 'notes.txt')\n"
             f"os.symlink({str(outside)!r}, 'keys')\nos.symlink('README.md', 'same.md')\n"
             "print(sorted(os.listdir('.')))")
    rlm, _ = scripted_rlm([block(plant, THOUGHT), block("FINAL('planted')")],
                          executor="isolated", workdir=str(work))
    assert rlm.run("Set up.").answer == "planted"
    assert (work / "notes.txt").is_symlink() and (work / "keys").is_symlink()
    with caplog.at_level("WARNING", logger="rlm_kernel.context.files"):
        context = load_contexts([str(work)])
    assert context == {"README.md": "project readme\n", "same.md": "project readme\n"}
    assert any("notes.txt" in r.getMessage() and "outside the folder" in r.getMessage()
               for r in caplog.records), caplog.records
    read = "print(sorted(context))\nprint(repr(context.get('notes.txt')))\nFINAL('read')"
    rlm, _ = scripted_rlm([block(read, THOUGHT)], executor="isolated", workdir=str(work))
    res = rlm.run("Summarise the project.", context=context)
    assert res.answer == "read" and not leaks(key, res.to_dict(), res.history.entries[0].output)


# -- z18: what the host sends to the worker -------------------------------------------------------
class _Holder:
    """A tool's result that holds a text in an attribute."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"_Holder({self.text!r})"


def test_z18_no_text_the_host_sends_to_model_code_holds_a_key(monkeypatch):
    """Case z18_tool_error_key_to_worker: a user's tool (served from the host) fails with
    an error that quotes a key the host holds (an HTTP client's error with its
    ``Authorization`` header); model code catches it behind the wall and prints it
    reversed and base64-encoded, forms no redaction of its output can recognise.  Its
    siblings: the tool *returns* the key (in a text, a dict, an object's attribute), and
    a sub-call's reply quotes it.  Model code gets every one of them redacted: the key,
    encoded or not, is in no output and nowhere in the result; the types stay (a dict
    is a dict) but for the object, which comes as its redacted text."""
    import base64

    key = fresh_key("z18")
    monkeypatch.setenv("OPENAI_API_KEY", key)

    def fetch_report(name: str) -> str:
        """Fetch a report from the company's API."""
        raise RuntimeError(f"request failed with headers {{'Authorization': 'Bearer {key}'}}")

    def settings(kind: str):
        """The service's settings."""
        return {"text": f"token={key}", "dict": {"auth": [key]}, "object": _Holder(key)}[kind]

    code = ("import base64\nseen = []\ntry:\n    fetch_report('q3')\n"
            "except BaseException as e:\n    seen.append(str(e))\n"
            "seen += [repr(settings(k)) for k in ('text', 'dict', 'object')]\n"
            "seen.append(llm_query('what is the key?'))\n"
            "print('TYPES', type(settings('dict')).__name__, type(settings('object')).__name__)\n"
            "for text in seen:\n    print('REV', text[::-1])\n"
            "    print('B64', base64.b64encode(text.encode()).decode())\n"
            "FINAL('done')")
    rlm, _ = scripted_rlm([block(code, THOUGHT)], [f"the key is {key}"], executor="isolated",
                          tools=[fetch_report, settings])
    res = rlm.run("question")
    out = res.history.entries[0].output
    decoded = [base64.b64decode(line[4:]).decode() for line in out.splitlines()
               if line.startswith("B64 ")]
    reversed_ = [line[4:][::-1] for line in out.splitlines() if line.startswith("REV ")]
    assert res.answer == "done" and len(decoded) == 5 == len(reversed_), out
    assert not leaks(key, *decoded, *reversed_, out, res.to_dict()), out
    assert all("[redacted OPENAI_API_KEY]" in text for text in decoded), decoded
    assert "Authorization" in decoded[0] and "{'auth': [" in decoded[2], decoded
    assert "TYPES dict str" in out, out


# -- z12: a password in a URL ---------------------------------------------------------------------
def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("where", ["client", "fleet"])
def test_z12_a_password_in_api_base_is_in_no_record(where, capfd):
    """Case z12_api_base_userinfo_key: the model's server is given with its credentials
    in the URL (``http://user:PASSWORD@host/v1``, a proxy's or a self-hosted server's
    basic-auth form), to a client built in code or in a fleet's deployment, and nothing
    listens there (the error names the server's URL).  The password is one of the
    process's secrets: it is in no field of the result, ``summary()``, ``to_dict()`` or
    what was printed, and the error still names the server with the password
    ``[redacted ...]``."""
    password = fresh_key("z12")
    base = f"http://rt:{password}@127.0.0.1:{_closed_port()}/v1"
    if where == "client":
        client = LiteLLMClient("openai/gpt-4o-mini", api_base=base, num_retries=0,
                               priced=False, timeout=5, api_key="sk-z12-not-a-real-key-0000")
        rlm = RLM(root_client=client, max_iterations=1, executor="in-process",
                  verify_answer=False)
    else:
        rlm = RLM(model="m", router=fleet(base, "sk-z12-other-not-real-0000"),
                  max_iterations=1, executor="in-process", verify_answer=False)
    res = rlm.run("question", context="data")
    assert res.stopped_by == "error" and res.error, res.error
    if where == "client":
        assert "[redacted api_base password]@127.0.0.1" in res.error, res.error
    assert not leaks(password, res, res.error, json.dumps(res.summary()),
                     json.dumps(res.to_dict(), default=str), *capfd.readouterr())


def test_z12_a_password_in_any_variable_s_url_is_a_secret(monkeypatch):
    """Sibling: a URL with credentials in a variable no key filter would name
    (``SERVICE_URL=postgres://app:PASSWORD@db/x``, ``HTTPS_PROXY``), printed by model
    code in-process (where it has the host's environment), is redacted in the output,
    percent-encoded characters and all; the user name and the host stay readable."""
    from rlm_kernel.redaction import Redactor, url_passwords

    password = fresh_key("z12env") + "%2Fx"
    monkeypatch.setenv("SERVICE_URL", f"postgres://app:{password}@db.internal:5432/x")
    assert url_passwords(f"see postgres://app:{password}@db/x") == [
        password, password.replace("%2F", "/")]
    assert url_passwords("http://user@host/x and mailto:a@b.c and http://h/?u=a:bcdefghij@x") == []
    code = "import os\nprint(os.environ['SERVICE_URL'])\nFINAL('done')"
    rlm, _ = scripted_rlm([block(code, THOUGHT)], executor="in-process")
    res = rlm.run("question")
    out = res.history.entries[0].output
    assert "postgres://app:[redacted SERVICE_URL password]@db.internal:5432/x" in out, out
    assert not leaks(password, out, res.to_dict())
    assert Redactor()(password.replace("%2F", "/")) == "[redacted SERVICE_URL password]"


# -- z25: a key written in pieces -----------------------------------------------------------------
@pytest.mark.parametrize("executor", EXECUTOR_KINDS)
def test_z25_a_key_written_in_pieces_on_one_stream_is_redacted(executor, monkeypatch):
    """Case z25_key_split_across_streams, the part docs/security.md claims: the user's
    context holds a key the process knows; model code writes it on stdout one character
    at a time, flushed 30 ms apart (each piece a chunk of its own), then in two halves
    0.3 s apart.  What the model reads next and the trajectory hold ``[redacted ...]``,
    not the key, in both executors.  (Halves on two streams, or in two steps, are not
    joined: docs/security.md says so.)"""
    key = fresh_key("z25")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    code = ("import sys, time\nk = context.split('=', 1)[1].strip()\nfor c in k:\n"
            "    sys.stdout.write(c); sys.stdout.flush(); time.sleep(0.03)\nprint()\n"
            "sys.stdout.write(k[:15]); sys.stdout.flush(); time.sleep(0.3)\n"
            "print(k[15:])\nFINAL('done')")
    rlm, model = scripted_rlm([block(code, THOUGHT)], executor=executor)
    res = rlm.run("question", context=f"OPENAI_API_KEY={key}\n")
    out = res.history.entries[0].output
    assert res.answer == "done" and out.count("[redacted OPENAI_API_KEY]") == 2, out
    assert not leaks(key, out, res.to_dict(), model.calls)
