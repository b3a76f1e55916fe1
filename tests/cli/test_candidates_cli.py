"""``rlm run --candidates N``: the option, the step printer's candidate lines and vote,
and ``--json``'s ``candidates`` (a scripted model stands in for the real one)."""

from __future__ import annotations

import json

import pytest

import rlm_kernel.engine as engine
from rlm_kernel.cli import main
from rlm_kernel.cli.run import build_parser
from rlm_kernel.engine.options import config_overrides
from rlm_kernel.models.scripted import ScriptedModel
from tests.replies import block

REPLIES = [block("x = 41\nFINAL_VAR('x')"), block("x = 42\nFINAL_VAR('x')"),
           block("x = 42.0\nFINAL_VAR('x')")]


@pytest.fixture()
def scripted(monkeypatch):
    """``rlm run`` builds an RLM whose clients are one scripted model."""
    monkeypatch.setenv("RLM_MODEL", "openai/scripted")  # no embedded model to prepare
    real = engine.RLM
    made: list = []

    class Scripted(real):
        def __init__(self, *args, **kwargs):
            lm = ScriptedModel(list(REPLIES))
            made.append((lm, kwargs))
            super().__init__(*args, root_client=lm, sub_client=lm, **kwargs)

    monkeypatch.setattr(engine, "RLM", Scripted)
    return made


def test_the_options_are_parsed_into_the_config():
    args = build_parser().parse_args(["run", "--candidates", "3",
                                      "--candidate-temperature", "0.5", "q"])
    assert config_overrides(args) == {"candidates": 3, "candidate_temperature": 0.5}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--candidates", "0", "q"])


def test_json_holds_the_candidates(scripted, capsys):
    code = main(["run", "--candidates", "3", "--json", "What is it?"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer"] == "42" and out["llm_calls"] == 3
    assert [c["votes"] for c in out["candidates"]] == [1, 2, 2]
    assert [c["chosen"] for c in out["candidates"]] == [False, True, False]
    assert scripted[0][1]["candidates"] == 3


def test_json_of_a_single_run_has_no_candidates(scripted, capsys):
    code = main(["run", "--json", "What is it?"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["answer"] == "41" and "candidates" not in out


def test_the_step_printer_heads_each_candidate_and_prints_the_vote(scripted, capsys):
    code = main(["run", "--candidates", "3", "What is it?"])
    out = capsys.readouterr().out
    assert code == 0
    assert "── candidate 1/3 ──\n" in out
    assert "── candidate 2/3 ── (temperature 0.7, seed 2)" in out
    assert "   candidate 1/3: answer '41' (1 vote so far), stopped by final after 1 step" in out
    assert "Vote (3 of 3 candidates ran): #1 '41' (1 vote) · #2 '42' (2 votes, chosen) · " \
        "#3 '42.0' (2 votes)" in out
    assert "Answer: 42" in out
