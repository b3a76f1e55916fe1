"""Every comm message a run sends matches its TypedDict in rlm_kernel.jupyter.protocol
(and so docs/protocol.md): a scripted run of %%rlm through the real frontend path,
with an extension announced and the comm layer recorded."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import comm as comm_module
import pytest

from rlm_kernel.jupyter import protocol
from rlm_kernel.models.factory import model_label
from tests.jupyter.scripted_magic import script
from tests.replies import block

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


class FakeComm:
    def __init__(self, target_name, data):
        self.target_name, self.opened, self.sent, self.closed = target_name, data, [], False

    def send(self, data):
        self.sent.append(data)

    def close(self):
        self.closed = True


def run_comms(ip, monkeypatch) -> list[FakeComm]:
    """Announce a fake extension to the shell's ``%rlm`` and record every run comm the
    frontend opens (widgets' comms are real); returns the list it fills."""
    comms: list[FakeComm] = []
    real_create = comm_module.create_comm

    def create_comm(*args, **kwargs):
        if kwargs.get("target_name") != protocol.RUN_TARGET:  # widgets' comms
            return real_create(*args, **kwargs)
        comms.append(FakeComm(kwargs["target_name"], kwargs["data"]))
        return comms[-1]

    monkeypatch.setattr(comm_module, "create_comm", create_comm)
    magics = ip.magics_manager.registry["RLMMagics"]
    monkeypatch.setitem(magics.registry.frontends, "fake-extension", {"version": 1})
    return comms


def keys_of(td: type) -> tuple[frozenset, frozenset]:
    return td.__required_keys__, td.__optional_keys__


def check(msg: dict, td: type) -> None:
    required, optional = keys_of(td)
    assert required <= set(msg) <= required | optional, (td.__name__, sorted(msg))
    hints = typing.get_type_hints(td)
    for key, value in msg.items():
        hint = hints[key]
        if typing.get_origin(hint) is typing.Literal:
            assert value in typing.get_args(hint)
        elif hint in (int, str, bool, float):
            assert isinstance(value, (int, float) if hint is float else hint), (key, value)
        elif typing.is_typeddict(hint):
            check(value, hint)
        elif typing.get_origin(hint) is list and typing.is_typeddict(typing.get_args(hint)[0]):
            for item in value:
                check(item, typing.get_args(hint)[0])


@pytest.fixture()
def ip(ip):
    """tests/conftest.py's shell, with no answer check (scripted replies); this file's
    names are removed afterwards."""
    ip.run_line_magic("config", "RLM.verify_answer = False")
    yield ip
    for name in ("context", "n", "rlm_answer"):
        ip.user_ns.pop(name, None)


THOUGHT = "Measure first.\n\nThen print."


def test_each_message_of_a_run_matches_its_typeddict(ip, monkeypatch):
    script(monkeypatch, [block("n = len(context)\nprint(n)", THOUGHT), block("FINAL(n)", THOUGHT)])
    comms = run_comms(ip, monkeypatch)
    ip.user_ns["context"] = "hello world"
    ip.run_cell("%%rlm --context context\nHow long?", store_history=True)
    assert ip.user_ns["rlm_answer"] == 11

    (run_comm,) = comms
    assert run_comm.target_name == protocol.RUN_TARGET and run_comm.closed
    messages = [run_comm.opened, *run_comm.sent]
    kinds = [m["type"] for m in messages]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert set(kinds) == set(protocol.MESSAGE_TYPES)  # every kind was built here
    for msg in messages:
        check(msg, protocol.MESSAGE_TYPES[msg["type"]])
    added = [m for m in messages if m["type"] == "step_added"]
    assert added[0]["source"] == "# Measure first.\n#\n# Then print.\nn = len(context)\nprint(n)"
    assert added[0]["metadata"]["rlm"]["role"] == "step"
    finished = [m for m in messages if m["type"] == "step_finished"]
    record = finished[0]["metadata"]["rlm"]
    assert record["exchanges"][0]["role"] == "root" and "n = len(context)" in \
        record["exchanges"][0]["response"]
    assert len(record["output_sha256"]) == 64 and finished[0]["diverged"] is False
    assert run_comm.opened["model_label"] == model_label(run_comm.opened["model"])
    end = messages[-1]
    assert (end["tone"], end["ending"], end["ending_words"], end["answer_note"]) == (
        "ok", "data", "The answer was computed by the model's code from your data.", None)


def test_typeddict_fields_are_the_documents():
    """Each message's own fields, as docs/protocol.md names them under its heading."""
    doc = DOC.read_text()
    for kind, td in protocol.MESSAGE_TYPES.items():
        section = doc.split(f"### `{kind}`", 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
        named = set(re.findall(r"`(\w+)`", section))
        own = set(typing.get_type_hints(td)) - {"type", "run_id", "cell_id"}
        assert own <= named, (kind, own - named)
    assert set(typing.get_type_hints(protocol.CellRLM)) == {
        "run_id", "step", "role", "task_cell", "exchanges", "output_sha256",
        "candidate", "chosen", "candidates",  # these three: a candidates run's cells
        "answer_now"}  # the "answer now" call's cell
    candidates = doc.split("### A candidates run", 1)[1].split("\n## ", 1)[0]
    assert {"candidate", "chosen", "candidates"} <= set(re.findall(r"`(\w+)`", candidates))
    assert protocol.CellRLM.__required_keys__ == {"run_id", "step", "role"}
    assert set(typing.get_type_hints(protocol.VariableInfo)) == {"name", "type", "length",
                                                                 "unit"}
    totals = {"llm_calls", "prompt_tokens", "completion_tokens", "cost_usd"}
    assert set(typing.get_type_hints(protocol.Totals)) == totals
    assert '"version": 1' in doc and "version" in protocol.Announcement.__optional_keys__


def test_a_stuck_runs_answer_now_call_is_sent_as_that_and_its_end_says_why(ip, monkeypatch):
    step = block("print(len(context))")
    script(monkeypatch, [step, step, step, block("FINAL(11)")])
    comms = run_comms(ip, monkeypatch)
    ip.user_ns["context"] = "hello world"
    ip.run_cell("%%rlm --context context\nHow long?", store_history=True)
    (run_comm,) = comms
    messages = [run_comm.opened, *run_comm.sent]
    for msg in messages:
        check(msg, protocol.MESSAGE_TYPES[msg["type"]])
    added = [m for m in messages if m["type"] == "step_added"]
    end = messages[-1]
    assert end["stopped_by"] == "stuck" and end["answer_source"] == "forced"
    # only the last cell is the "answer now" call, said so; the others are steps
    assert [bool(m.get("answer_now")) for m in added] == [False] * (len(added) - 1) + [True]
    assert added[-1]["metadata"]["rlm"]["answer_now"] is True
    finished = [m for m in messages if m["type"] == "step_finished"]
    assert finished[-1]["metadata"]["rlm"]["answer_now"] is True
    assert end["tone"] == "caution" and end["ending"] == "forced"
    assert end["ending_words"] == end["answer_note"] == (
        "The answer was the model's best guess, asked for after the run stopped early; "
        "the run stopped because the model repeated itself.")
