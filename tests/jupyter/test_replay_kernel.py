"""Replay in a real kernel: a run of the real embedded model is exported, then replayed
in a second kernel whose only model is unreachable (so any model call would fail): the
same answer and step outputs; with a changed context the replay reports ``diverged_at``."""

from __future__ import annotations

import os

import pytest

from evals.questions import stdlib_dir
from tests.kernel_client import execute, printed_json, running, text_of

pytestmark = pytest.mark.slow

CONTEXT = (f"context = open({str(stdlib_dir() / 'json' / '__init__.py')!r}).read()\n"
           "question = 'How many lines of the text in context start with the word import?'")
REPORT = ("import json\n"
          "_m = get_ipython().magics_manager.registry['RLMMagics']\n"
          "_r = list(_m.runs.values())[-1].result\n"
          "print(json.dumps({'answer': _r.answer, 'diverged_at': _r.diverged_at, "
          "'stopped_by': _r.stopped_by, 'outputs': [e.output for e in _r.history], "
          "'models': sorted({c.model for c in _r.calls})}))")


def report(kc) -> dict:
    return printed_json(kc, REPORT)


def test_an_exported_real_run_replays_with_no_model(local_server, kc, tmp_path):
    execute(kc, CONTEXT + "\n%config RLM.max_iterations = 6", timeout=60)
    reply, messages = execute(kc, "%rlm {question}", timeout=900)
    assert reply["content"]["status"] == "ok", text_of(messages)
    original = report(kc)
    execute(kc, f"%rlm export {tmp_path / 'run.ipynb'}", timeout=60)
    assert original["outputs"], original

    unreachable = {**os.environ, "RLM_MODEL": "openai/unreachable-model",
                   "RLM_SUB_MODEL": "openai/unreachable-model",
                   "OPENAI_API_BASE": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "none"}
    with running("rlm", env=unreachable) as (_, kc):
        execute(kc, CONTEXT + "\n%config RLM.max_iterations = 6", timeout=60)
        reply, messages = execute(kc, f"%rlm replay {tmp_path / 'run.ipynb'}", timeout=300)
        assert reply["content"]["status"] == "ok", text_of(messages)
        replayed = report(kc)
        assert replayed["answer"] == original["answer"]
        assert replayed["outputs"] == original["outputs"]
        assert replayed["diverged_at"] is None and replayed["stopped_by"] == original["stopped_by"]
        assert all(m.startswith("replay/") for m in replayed["models"]), replayed["models"]

        execute(kc, "context = context.replace('import', 'IMPORT')", timeout=60)
        reply, messages = execute(kc, f"%rlm replay {tmp_path / 'run.ipynb'}", timeout=300)
        changed = report(kc)
        assert changed["diverged_at"] is not None, changed
        assert "diverged_at" in text_of(messages)


@pytest.mark.slow
def test_an_exported_notebook_reruns_offline_from_its_recorded_sub_calls(tmp_path):
    """The exported notebook's ``%%rlm recorded`` cell answers the steps' ``llm_query``
    calls: re-run top to bottom in an rlm kernel whose model is unreachable, every
    step's output is the recorded one (scripted replies stand in for the model here:
    what is tested is the notebook's re-run, not an answer)."""
    import nbformat
    from nbclient import NotebookClient

    from rlm_kernel.engine import RLM
    from rlm_kernel.export import export_run
    from rlm_kernel.models.scripted import ScriptedModel

    lm = ScriptedModel(["```repl\nparts = llm_query_batched([w + '!' for w in "
                        "context.split()])\nprint(parts)\n```",
                        "```repl\nprint(llm_query('and?'))\nFINAL(len(parts))\n```"],
                       sub_replies=["ONE", "TWO", "THREE"])
    result = RLM(root_client=lm, sub_client=lm, verify_answer=False).run(
        "Shout", context="one two")
    path = tmp_path / "run.ipynb"
    nb = export_run(result, path, setup_cells=["context = 'one two'"])
    roles = [c.metadata.rlm["role"] for c in nb.cells]
    assert roles == ["task", "setup", "recorded", "step", "step", "answer"]
    unreachable = {"RLM_MODEL": "openai/unreachable-model",
                   "RLM_SUB_MODEL": "openai/unreachable-model",
                   "OPENAI_API_BASE": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "none"}
    old = {k: os.environ.get(k) for k in unreachable}
    os.environ.update(unreachable)
    try:
        rerun = nbformat.read(path, as_version=4)
        NotebookClient(rerun, timeout=120, kernel_name="rlm").execute()
    finally:
        for k, v in old.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    steps = [c for c in rerun.cells if c.metadata.rlm["role"] == "step"]
    printed = ["".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
               for c in steps]
    assert printed[0] == "".join(o.get("text", "") for o in nb.cells[3].outputs)
    assert sorted(eval(printed[0])) == ["ONE", "TWO"] and printed[1].startswith("THREE")
    # each step shows what it showed live: the last one's FINAL printed nothing then,
    # and its re-run shows no "Final answer: ..." either (the answer cell says it)
    live = [c for c in nb.cells if c.metadata.rlm["role"] == "step"]
    shown = [[o.get("text") or o.get("data", {}).get("text/plain") for o in c.outputs]
             for c in steps]
    assert shown == [[o.get("text") or o.get("data", {}).get("text/plain")
                      for o in c.outputs] for c in live], shown
