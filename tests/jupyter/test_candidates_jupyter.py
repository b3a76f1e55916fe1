"""A candidates run in Jupyter: ``%%rlm --candidates N`` in the live namespace, the comm
messages (every candidate's steps live, the summary cell, the chosen candidate's record),
inline rendering, and the widgets on the candidate events."""

from __future__ import annotations

import nbformat
import pytest

import rlm_kernel.engine.loop as engine
from rlm_kernel import RLM
from rlm_kernel.engine.events import Event
from rlm_kernel.engine.recording import _from_notebook
from rlm_kernel.jupyter import protocol
from rlm_kernel.jupyter.frontend import StepRenderer
from rlm_kernel.jupyter.magic import parse_line
from rlm_kernel.jupyter.widgets import ProgressView
from rlm_kernel.models.scripted import ScriptedModel
from tests.jupyter.test_protocol import check, run_comms
from tests.replies import block

REPLIES = [block("only_one = 1\nx = 41\nFINAL_VAR('x')", "First try."),
           block("only_two = 2\nprint('two')", "Look."), block("x = 42\nFINAL_VAR('x')"),
           block("only_three = 3\nx = 42.0\nFINAL_VAR('x')")]


@pytest.fixture()
def ip(ip):
    """tests/conftest.py's shell, with no answer check (scripted replies); this file's
    names are removed afterwards."""
    ip.run_line_magic("config", "RLM.verify_answer = False")
    yield ip
    for name in ("context", "x", "rlm_answer", "only_one", "only_two", "only_three"):
        ip.user_ns.pop(name, None)


def scripted(monkeypatch) -> ScriptedModel:
    lm = ScriptedModel(list(REPLIES))
    monkeypatch.setattr(engine, "make_client", lambda model, **kw: lm)
    return lm


def test_the_magic_takes_candidates():
    opts, question = parse_line("--candidates 3 --candidate-temperature 0.4 How long?")
    assert (opts.candidates, opts.candidate_temperature, question) == (3, 0.4, "How long?")


def test_a_cell_task_with_candidates_leaves_the_chosen_namespace(ip, monkeypatch, tmp_path):
    lm = scripted(monkeypatch)
    ip.user_ns["context"] = "hello"
    ip.run_cell("%%rlm --context context --candidates 3\nWhat is it?", store_history=True)
    assert ip.user_ns["rlm_answer"] == 42 and len(lm.calls) == 4
    assert ip.user_ns["only_two"] == 2 and ip.user_ns["x"] == 42
    assert "only_one" not in ip.user_ns and "only_three" not in ip.user_ns
    magics = ip.magics_manager.registry["RLMMagics"]
    record = list(magics.runs.values())[-1]
    assert len(record.step_outputs) == 2 == record.result.steps  # the chosen steps only
    assert record.step_outputs[0][0]["text"] == "two\n"
    ip.run_line_magic("rlm", f"export {tmp_path / 'run.ipynb'}")
    nb = nbformat.read(tmp_path / "run.ipynb", as_version=4)
    assert [c.metadata["rlm"]["role"] for c in nb.cells].count("candidates") == 1


def test_c_rlm_candidates_is_a_setting(ip, monkeypatch):
    lm = scripted(monkeypatch)
    ip.user_ns["context"] = "hello"
    ip.run_line_magic("config", "RLM.candidates = 3")
    try:
        ip.run_line_magic("rlm", "--context context What is it?")
    finally:
        ip.run_line_magic("config", "RLM.candidates = 1")
    assert ip.user_ns["rlm_answer"] == 42 and len(lm.calls) == 4


def test_the_comm_shows_every_candidate_live_and_records_the_chosen_one(ip, monkeypatch):
    scripted(monkeypatch)
    comms = run_comms(ip, monkeypatch)
    ip.user_ns["context"] = "hello"
    ip.run_cell("%%rlm --context context --candidates 3\nWhat is it?", store_history=True)
    assert ip.user_ns["rlm_answer"] == 42

    (run_comm,) = comms  # one comm for the whole run
    messages = [run_comm.opened, *run_comm.sent]
    for msg in messages:
        check(msg, protocol.MESSAGE_TYPES[msg["type"]])
    assert [m["type"] for m in messages].count("run_started") == 1
    added = [m for m in messages if m["type"] == "step_added"]
    steps = [m for m in added if m["metadata"]["rlm"]["role"] == "step"]
    assert [(m["step"], m["metadata"]["rlm"]["candidate"]) for m in steps] == \
        [(1, 1), (1, 2), (2, 2), (1, 3)]
    firsts = [m["source"].splitlines()[0] for m in steps]
    assert firsts == ["# ── candidate 1/3 ──", "# ── candidate 2/3 ──", "# Thinking.",
                      "# ── candidate 3/3 ──"]
    summary = added[-1]
    assert summary["step"] == 0 and summary["metadata"]["rlm"]["role"] == "candidates"
    assert summary["metadata"]["rlm"]["chosen"] == 2
    assert "# candidate 2: '42' (2 votes, 2 steps, final)  <- chosen" in summary["source"]
    assert messages[-1]["type"] == "run_finished" and messages[-1]["answer"] == "42"
    finished = [m for m in messages if m["type"] == "step_finished"]
    assert all(m["metadata"]["rlm"]["candidate"] for m in finished)
    assert all(e["step"] == m["step"] for m in finished
               for e in m["metadata"]["rlm"]["exchanges"])

    # The live notebook as the extension builds it: a replay reads the chosen cells.
    cells = [{"cell_type": "code", "source": a["source"],
              "metadata": {"rlm": {**a["metadata"]["rlm"], **f["metadata"]["rlm"]}}}
             for a, f in zip(steps, finished, strict=True)]
    cells.append({"cell_type": "code", "source": summary["source"],
                  "metadata": summary["metadata"]})
    rec = _from_notebook({"cells": cells, "metadata": {}})
    assert [e["response"].splitlines()[-2] for e in rec.exchanges] == \
        ["print('two')", "FINAL_VAR('x')"]
    assert len(rec.outputs) == 2


def events_of_a_candidates_run() -> list[Event]:
    lm = ScriptedModel(list(REPLIES))
    events: list[Event] = []
    RLM(root_client=lm, sub_client=lm, verify_answer=False, candidates=3,
        observer=events.append).run("What is it?", context="hello")
    return events


def test_inline_blocks_name_their_candidate_and_the_others_collapse_at_the_end():
    shown: list[tuple[dict, str, bool]] = []
    renderer = StepRenderer("r1", None, lambda data, md, did, update: shown.append(
        (data, did, update)), use_comm=False, executor=None)
    for event in events_of_a_candidates_run():
        renderer(event)
    ids = [did for _, did, _ in shown]
    assert "rlm-r1-1-1" in ids and "rlm-r1-2-2" in ids and "rlm-r1-3-1" in ids
    heads = [data["text/plain"].splitlines()[0] for data, _, _ in shown]
    assert any(h.startswith("── Candidate 2/3 · Step 2 · ") for h in heads)
    collapsed = [(data, did) for data, did, update in shown if "not chosen" in
                 data["text/plain"]]
    assert sorted(did for _, did in collapsed) == ["rlm-r1-1-1", "rlm-r1-3-1"]
    assert all(data["text/html"].startswith("<details><summary>") for data, _ in collapsed)
    data, did, _ = shown[-1]
    assert did == "rlm-r1-candidates"
    assert data["text/plain"] == ("Candidates: #1 '41' (1 vote) · #2 '42' (2 votes, chosen) · "
                                  "#3 '42.0' (2 votes)")
    assert len(renderer.step_outputs) == 2 and renderer.step_candidates == [2, 2]


def test_the_progress_view_follows_the_candidates():
    view = ProgressView(12, tick=None)
    seen = []
    for event in events_of_a_candidates_run():
        view.on_event(event)
        seen.append(view.text())
    assert any(line.startswith("candidate 2/3 · step 2 of 12") for line in seen)
    assert any("candidate 3 done: '42.0' (2 votes)" in line for line in seen)
    assert seen[-1].startswith("candidate 2 chosen · 2 steps, final")
    assert "finished: final" in seen[-1]
