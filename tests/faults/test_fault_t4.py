"""Fault cases of ``../shared/fault-cases-t4/`` against what a session and its runs keep:
candidates (namespace, budgets), the user's tools, follow-up tasks, and what ``rlm run``
prints for awkward answers and inputs.

The wall and the channel have their own modules (``test_fault_t4_wall.py``,
``test_fault_t4_channel.py``); :mod:`.t4_support` holds what they share.  Each test's
docstring names its case file and asserts the case's claim.
"""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

import rlm_kernel.engine as engine
from rlm_kernel import RLM
from rlm_kernel.cli import main
from rlm_kernel.engine.session.conversation import Conversation
from rlm_kernel.executors import EXECUTOR_KINDS, PlainExecutor
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block
from tests.scripted import scripted_rlm

from .helpers import THOUGHT
from .t4_support import cli_command, one_json

pytestmark = pytest.mark.timeout(180)

def _model(*codes: str) -> ScriptedModel:
    return ScriptedModel([block(c, THOUGHT) for c in codes])


def _rlm(*codes: str, **cfg) -> tuple[RLM, ScriptedModel]:
    """A scripted run of ``codes`` (one step each, tests/scripted.py) with the cases' 2 s
    step limit."""
    return scripted_rlm([block(c, THOUGHT) for c in codes], step_timeout=2, **cfg)


# -- candidates ------------------------------------------------------------------------------
@pytest.mark.skipif(sys.platform != "linux", reason="the isolated executor is Linux's")
def test_a_candidate_that_kills_its_worker_leaves_the_sessions_values_as_they_were():
    """Case x18_candidates_stale_remote_value: a first task leaves ``pat =
    re.compile('a+')`` (not plain data: it stays in the worker); a second task with
    candidates=2 has candidate 1 end its worker (``os._exit``).  Claim: the namespace
    ends as if only the chosen candidate had run, and the REPL restarts with the
    variables as they were: candidate 2 and the session still have a ``Pattern``."""
    from rlm_kernel.executors.isolated import IsolatedExecutor

    with IsolatedExecutor() as ex:
        rlm, _ = _rlm("import re\npat = re.compile('a+')\nn = 1\nFINAL(str(n))",
                      max_iterations=4)
        rlm.run("first", context="aaa", executor=ex)
        rlm, _ = _rlm("import os\nos._exit(1)", "FINAL('1')",
                      "print('pat is a', type(pat).__name__)", "FINAL('2')", candidates=2,
                      candidates_early_stop=False, max_iterations=4)
        res = rlm.run("second", context="aaa", executor=ex)
        seen = [e.output.strip() for e in res.history.entries if "pat is a" in e.output]
        after = ex.execute("print(type(pat).__name__)", timeout=5).stdout.strip()
    assert seen == ["pat is a Pattern"], f"candidate 2 saw {seen}"
    assert after == "Pattern", f"after the run the session's pat is a {after}"


@pytest.mark.parametrize("kind", EXECUTOR_KINDS)
def test_budgets_cover_all_candidates_together(kind):
    """Case x19_candidates_budget_total: candidates=3, each makes 3 ``llm_query`` calls
    and answers differently; max_llm_calls=8.  Claim: budgets cover all candidates
    together (at most 8 model calls, all in the ledger); a budget stop ends the run
    with the vote so far. [meaningful HELD]"""
    codes = []
    for k in range(3):
        codes += ["for i in range(3):\n    llm_query('p%d' % i)\nprint('ok')", f"FINAL('ans{k}')"]
    rlm, lm = _rlm(*codes, executor=kind, max_iterations=4, candidates=3, max_llm_calls=8)
    res = rlm.run("q", context="x")
    assert len(lm.calls) <= 8, (len(lm.calls), res.stopped_by, res.answer)
    assert res.llm_calls == len(lm.calls)


def parse_log(line):
    """Parse one line."""
    return line.upper()


@pytest.mark.parametrize("kind", EXECUTOR_KINDS)
def test_a_candidates_changes_are_undone_for_the_next(kind):
    """Case x20_candidates_namespace_rollback: candidate 1 deletes ``context``, rebinds
    the user's tool ``parse_log`` to None and adds a name; candidate 2 reads them (3
    candidates, candidate 2 chosen).  Claim: protected inputs and tools are put back,
    and the namespace ends as if only the chosen candidate had run. [meaningful HELD]"""
    c1 = "del context\nparse_log = None\nmine = 1\nFINAL('a')"
    c2 = "print('SEEN', repr(context), parse_log('x'), 'mine' in globals())\nFINAL('b')"
    rlm, _ = _rlm(c1, c2, "FINAL('b')", executor=kind, tools=[parse_log], candidates=3,
                  candidates_early_stop=False)
    res = rlm.run("q", context="the data")
    out = " ".join(e.output for e in res.history.entries)
    seen = out.split("SEEN", 1)[1].split("\n")[0].strip() if "SEEN" in out else out[-200:]
    assert seen == "'the data' X False", f"candidate 2 saw {seen!r}"


# -- the user's tools ---------------------------------------------------------------------------
TOOL_MODULE = '''"""A user's module of tools."""
import json


def parse_log(line):
    """Parse one log line."""
    return json.dumps({"line": line})
'''

TAMPER = ("try:\n    parse_log.__code__ = (lambda line: 'TAMPERED').__code__\n"
          "except Exception as e:\n    print('code:', type(e).__name__)\n"
          "try:\n    parse_log.__globals__['json'] = None\n"
          "except Exception as e:\n    print('globals:', type(e).__name__)\n"
          "try:\n    parse_log.__defaults__ = ('x',)\n"
          "except Exception as e:\n    print('defaults:', type(e).__name__)\n"
          "print(parse_log('x'))")


@pytest.mark.parametrize("kind", EXECUTOR_KINDS,
                         ids=[{"in-process": "x23-in-process", "isolated": "x24-isolated"}[k]
                              for k in EXECUTOR_KINDS])
def test_model_code_cannot_rewrite_the_users_tools(kind, tmp_path):
    """Cases x23_tool_code_tamper_inprocess (in-process) and
    x24_tool_code_tamper_isolated (isolated): model code rewrites the user's tool in
    place (``__code__``, ``__defaults__``, and ``json`` in its module's globals).  Claim:
    the user's tools are put back (in-process) or served from the host (isolated): after
    the run the user's function and its module are as they were."""
    path = tmp_path / "t4_user_tools.py"
    path.write_text(TOOL_MODULE)
    spec = importlib.util.spec_from_file_location("t4_user_tools", path)
    tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tools)
    code, real_json = tools.parse_log.__code__, tools.json
    rlm, _ = _rlm(TAMPER, "FINAL('ok')", executor=kind, tools=[tools.parse_log])
    rlm.run("q", context="x")
    assert tools.json is real_json, f"the tool's module now has json = {tools.json!r}"
    assert tools.parse_log.__code__ is code and tools.parse_log.__defaults__ is None
    assert tools.parse_log("x") == '{"line": "x"}'


# -- follow-up tasks ---------------------------------------------------------------------------
def test_a_follow_up_cannot_rewrite_the_sessions_record():
    """Case x29_followup_history_mutation: in-process, task 2's model code rewrites
    ``rlm_history`` in place (task 1's answer and code) and appends a fake task.  Claim:
    ``rlm_history`` holds every earlier task as it was, and the conversation told to
    the next task is the session's record, not model code's. [meaningful HELD]"""
    ex, conv = PlainExecutor(), Conversation()
    rlm, _ = _rlm("n = 41\nFINAL(str(n + 1))", executor="in-process")
    conv.record(rlm.run("first?", context="x", executor=ex, history=conv), ex.namespace)
    evil = ("rlm_history[0]['answer'] = 'EVIL-ANSWER'\nrlm_history[0]['code'] = 'EVIL-CODE'\n"
            "rlm_history.append({'question': 'EVIL-TASK', 'answer': 'EVIL'})\nm = 1\n"
            "FINAL(str(m))")
    rlm, _ = _rlm(evil, executor="in-process")
    conv.record(rlm.run("second?", context="x", executor=ex, history=conv), ex.namespace)
    rlm, lm = _rlm("print('H', rlm_history[0]['answer'], rlm_history[0]['code'], "
                   "len(rlm_history))\nFINAL('3')", executor="in-process")
    res = rlm.run("third?", context="x", executor=ex, history=conv)
    assert res.history.entries[0].output.strip() == "H 42 n = 41\nFINAL(str(n + 1)) 2"
    prompt = str(lm.calls[0])
    assert "Task: EVIL-TASK" not in prompt and "Answer: EVIL" not in prompt
    assert "Answer: 42" in prompt.split("1. Task:", 1)[-1][:200], prompt[:600]


# -- rlm run's output -----------------------------------------------------------------------------
@pytest.fixture()
def scripted_cli(monkeypatch):
    """``rlm run`` (in this process) builds an RLM whose clients are one scripted model;
    returns a function that sets its code steps."""
    monkeypatch.setenv("RLM_MODEL", "openai/scripted")
    real, codes = engine.RLM, []

    class Scripted(real):
        def __init__(self, *args, **kwargs):
            lm = _model(*codes)
            super().__init__(*args, root_client=lm, sub_client=lm, **kwargs)

    monkeypatch.setattr(engine, "RLM", Scripted)
    return codes.extend


@pytest.mark.parametrize(("returns", "code"), [
    ("float", "x = float('nan')\nFINAL(x)"),
    ("dict", "x = {'a': float('inf'), 'b': [1e309, -1e309]}\nFINAL(x)"),
], ids=["nan-float", "inf-dict"])
def test_json_output_is_strict_json_whatever_the_answer(scripted_cli, capsys, returns, code):
    """Case x26_cli_json_nan: ``rlm run --returns float --json`` with ``FINAL(nan)``, and
    ``--returns dict`` with infinities.  Claim: ``--json`` prints one JSON object (RFC 8259:
    no bare ``NaN`` / ``Infinity`` tokens) with ``answer_value`` as JSON data."""
    scripted_cli([code])
    rc = main(["run", "--returns", returns, "--json", "--no-ground-answer",
               "--step-timeout", "2", "q"])
    out = capsys.readouterr().out
    obj = one_json(out)
    assert obj is not None, f"--json printed no strict JSON object (rc {rc}): {out[-400:]!r}"
    assert "answer_value" in obj and "answer" in obj


def test_a_context_file_too_big_for_the_worker_gives_one_json_object(tmp_path):
    """Case x31_cli_big_context_file: ``rlm run --json --context big.txt`` with a 2.2 GB
    text file (sparse).  Claim: ``--json`` prints one JSON object; an error is one
    readable line with the exit code of docs/cli.md (2 bad input, 1 failed run), never "could
    not start" for a worker that started."""
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.write(b"x" * 100)
        f.truncate(2_200_000_000)
    rc, out, err = cli_command(["print(len(context))", "FINAL('read it')"], "--json",
                               "--context", str(big), timeout=150)
    big.unlink()
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("T4HOSTPKG")]
    assert rc is not None, f"rlm run did not end within 150 s: {err[-400:]!r}"
    assert one_json(out) is not None, f"rc {rc}; stdout {out[-300:]!r}; stderr {lines[-3:]}"
    assert rc in (0, 1, 2), f"exit status {rc}"
    assert not any("could not start" in ln for ln in lines), lines[-3:]
    if rc:
        assert len(lines) == 1 and "Traceback" not in err, f"stderr: {lines}"


def test_the_json_helper_refuses_bare_constants():
    """The check x26 and x31 rely on: :func:`.t4_support.one_json` accepts one strict
    JSON object only."""
    assert one_json('{"a": 1}\n') == {"a": 1}
    assert one_json('{"a": NaN}') is None and one_json('{"a": Infinity}') is None
    assert one_json('{"a": 1}\n{"b": 2}') is None and one_json(json.dumps([1])) is None
