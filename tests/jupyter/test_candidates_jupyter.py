"""A candidates run in Jupyter: ``%%rlm --candidates N`` in the live namespace, the comm
messages (every candidate's steps live, the chosen one named at the end, the chosen
candidate's record), the one summary output, inline rendering, and the widgets on the
candidate events."""

from __future__ import annotations

import nbformat
import pytest

from rlm_kernel import RLM
from rlm_kernel.engine.events import Event
from rlm_kernel.engine.replay.recording import _from_notebook
from rlm_kernel.jupyter import protocol
from rlm_kernel.jupyter.frontend import StepRenderer
from rlm_kernel.jupyter.magic import parse_line
from rlm_kernel.jupyter.widgets import ProgressView
from rlm_kernel.models.scripted import ScriptedModel
from tests.jupyter.scripted_magic import script
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
    """REPLIES as every model client the shell's ``%rlm`` session makes."""
    return script(monkeypatch, list(REPLIES))


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
    from IPython.utils.capture import capture_output

    scripted(monkeypatch)
    comms = run_comms(ip, monkeypatch)
    ip.user_ns["context"] = "hello"
    with capture_output() as cap:
        ip.run_cell("%%rlm --context context --candidates 3\nWhat is it?", store_history=True)
    assert ip.user_ns["rlm_answer"] == 42

    (run_comm,) = comms  # one comm for the whole run
    messages = [run_comm.opened, *run_comm.sent]
    for msg in messages:
        check(msg, protocol.MESSAGE_TYPES[msg["type"]])
    assert [m["type"] for m in messages].count("run_started") == 1
    added = [m for m in messages if m["type"] == "step_added"]
    assert all(m["metadata"]["rlm"]["role"] == "step" for m in added)  # no summary cell
    assert [(m["step"], m["metadata"]["rlm"]["candidate"]) for m in added] == \
        [(1, 1), (1, 2), (2, 2), (1, 3)]
    firsts = [m["source"].splitlines()[0] for m in added]  # the model's code, no banner
    assert firsts == ["# First try.", "# Look.", "# Thinking.", "# Thinking."]
    end = messages[-1]
    assert end["type"] == "run_finished" and end["answer"] == "42"
    assert end["chosen"] == 2 and [c["index"] for c in end["candidates"]] == [1, 2, 3]
    finished = [m for m in messages if m["type"] == "step_finished"]
    assert all(m["metadata"]["rlm"]["candidate"] for m in finished)
    assert all(e["step"] == m["step"] for m in finished
               for e in m["metadata"]["rlm"]["exchanges"])

    # one summary output in the task cell: HTML, each candidate expandable
    (summary,) = [o.data for o in cap.outputs if "Candidates:" in o.data.get("text/plain", "")]
    assert summary["text/plain"].splitlines()[0] == \
        "Candidates: 3 ran · candidate 2 chosen (2 of 3 agreed on its answer)"
    assert summary["text/html"].count('<details class="rlm-candidate"') == 3
    assert "Candidate 2 · &#x27;42&#x27; · 2 votes · 2 steps · " in summary["text/html"]
    assert "only_one = 1" in summary["text/html"]  # candidate 1's step, folded in
    assert "Its steps are the step cells below." in summary["text/html"]

    # The live notebook once the extension removed the other candidates' cells: a
    # replay reads the chosen cells.
    cells = [{"cell_type": "code", "source": a["source"],
              "metadata": {"rlm": {**a["metadata"]["rlm"], **f["metadata"]["rlm"]}}}
             for a, f in zip(added, finished, strict=True)
             if a["metadata"]["rlm"]["candidate"] == end["chosen"]]
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


def test_inline_blocks_name_their_candidate_and_the_others_fold_into_one_summary():
    shown: list[tuple[dict, str, bool]] = []
    renderer = StepRenderer("r1", None, lambda data, md, did, update: shown.append(
        (data, did, update)), use_comm=False, executor=None)
    for event in events_of_a_candidates_run():
        renderer(event)
    ids = [did for _, did, _ in shown]
    assert "rlm-r1-1-1" in ids and "rlm-r1-2-2" in ids and "rlm-r1-3-1" in ids
    heads = [data["text/plain"].splitlines()[0] for data, _, _ in shown if data]
    assert any(h.startswith("── Step 2 · candidate 2/3 · ") for h in heads)
    # the blocks of the candidates not chosen are emptied (an empty bundle shows nothing)
    emptied = sorted(did for data, did, update in shown if update and data == {})
    assert emptied == ["rlm-r1-1-1", "rlm-r1-3-1"]
    data, did, update = shown[-1]
    assert did == "rlm-r1-candidates" and not update
    lines = data["text/plain"].splitlines()
    assert lines[0] == "Candidates: 3 ran · candidate 2 chosen (2 of 3 agreed on its answer)"
    assert lines[1].startswith("  Candidate 1 · '41' · 1 vote · 1 step · ")
    assert lines[2].startswith("  Candidate 2 · '42' · 2 votes · 2 steps · ")
    assert lines[2].endswith(" · final · chosen")
    assert lines[3].startswith("  Candidate 3 · '42.0' · 2 votes · 1 step · ")
    assert "Its steps are the steps above." in data["text/html"]
    assert "only_three = 3" in data["text/html"] and "only_one = 1" in data["text/html"]
    assert len(renderer.step_outputs) == 2 and renderer.step_candidates == [2, 2]


def test_the_summary_escapes_what_the_model_wrote():
    from rlm_kernel.jupyter.frontend import candidates_summary

    bundle = candidates_summary(
        [{"index": 1, "answer": "<b>x</b>", "votes": 1, "steps": 1, "seconds": 0.5,
          "stopped_by": "final", "chosen": False},
         {"index": 2, "answer": None, "votes": 0, "steps": 0, "seconds": 0.1,
          "stopped_by": "error", "chosen": True}],
        {1: [{"step": 1, "source": "print('<i>')", "outputs": [
            {"output_type": "stream", "name": "stdout", "text": "<i>\n"}], "count": 3,
            "seconds": 0.01}]}, asked=3)
    page = bundle["text/html"]
    assert "<b>x</b>" not in page and "<i>" not in page.replace("<i>No step", "")
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "print(&#x27;&lt;i&gt;&#x27;)" in page
    assert bundle["text/plain"].splitlines()[0] == \
        "Candidates: 2 of 3 ran · candidate 2 chosen (0 of 2 agreed on its answer)"
    assert "Step 1 · [3] · 0.01 s" in page


def test_the_progress_view_follows_the_candidates():
    view = ProgressView(12, tick=None)
    seen = []
    for event in events_of_a_candidates_run():
        view.on_event(event)
        seen.append(view.text())
    assert any(line.startswith("candidate 2/3 · step 2 of 12") for line in seen)
    assert any("candidate 3 done: '42.0' (2 votes)" in line for line in seen)
    assert seen[-1].startswith("candidate 2 chosen · 2 steps, final")
    assert seen[-1].endswith(" · The answer was reached without reading your data; 2 of 3 "
                             "candidates agreed.")
