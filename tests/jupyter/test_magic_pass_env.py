"""``%%rlm --pass-env`` and ``c.RLM.pass_env``: the environment variables an isolated
task's model code gets by name, beyond the allow-list
(:mod:`rlm_kernel.executors.environment`).  In-process IPython shell with a scripted
model (the magic's options and ``%config``), then a real RLM kernel started by
jupyter_client with the variable in its environment; the workers are real sandboxes."""

from __future__ import annotations

import os

import pytest

from rlm_kernel.executors.environment import PASS_ENV_VARIABLE
from tests.jupyter.scripted_magic import magics, quiet_shell, script
from tests.kernel_client import execute, printed_json, running, script_model
from tests.replies import block

SHOW = ("import os\nFINAL([os.environ.get('T_NB_HOST'), os.environ.get('T_NB_USER'), "
        "os.environ.get('T_NB_UNNAMED')])")
"""Model code that answers with what it sees of three of the host's variables."""


@pytest.fixture()
def shell(ip, monkeypatch):
    monkeypatch.delenv(PASS_ENV_VARIABLE, raising=False)
    for name, value in (("T_NB_HOST", "db.internal.example"), ("T_NB_USER", "app"),
                        ("T_NB_UNNAMED", "kept-out")):
        monkeypatch.setenv(name, value)
    yield from quiet_shell(ip, ("rlm_answer",))
    ip.run_line_magic("config", "RLM.pass_env = []")


def test_the_option_passes_the_named_variables_to_an_isolated_task(shell, monkeypatch):
    script(monkeypatch, [block(SHOW)])
    shell.run_cell("%%rlm --isolated --pass-env T_NB_HOST,T_NB_USER\nWhat do you see?")
    assert shell.user_ns["rlm_answer"] == ["db.internal.example", "app", None]


def test_without_it_an_isolated_task_sees_none_of_them(shell, monkeypatch):
    script(monkeypatch, [block(SHOW)])
    shell.run_cell("%%rlm --isolated\nWhat do you see?")
    assert shell.user_ns["rlm_answer"] == [None, None, None]


def test_the_trait_passes_them_to_every_isolated_task(shell, monkeypatch):
    script(monkeypatch, [block(SHOW)])
    shell.run_line_magic("config", "RLM.pass_env = ['T_NB_USER']")
    shell.run_cell("%%rlm --isolated\nWhat do you see?")
    assert shell.user_ns["rlm_answer"] == [None, "app", None]
    # a task's option wins over the trait for that task
    script(monkeypatch, [block(SHOW)])
    shell.run_cell("%%rlm --isolated --new --pass-env T_NB_HOST\nWhat do you see?")
    assert shell.user_ns["rlm_answer"] == ["db.internal.example", None, None]


def test_a_name_that_is_no_variable_is_refused_with_its_bound(shell):
    from traitlets import TraitError

    with pytest.raises(TraitError, match="'T-NB' is not the name of an environment variable"):
        magics(shell).pass_env = ["T-NB"]


def test_c_rlm_pass_env_in_a_real_kernel():
    """The RLM kernel started with the variables in its environment: ``%config
    RLM.pass_env`` (as ``c.RLM.pass_env`` in a config file) passes the named one to the
    isolated task's worker, and only that one (model code in the kernel itself would
    see all three)."""
    env = {**os.environ, "T_NB_HOST": "db.internal.example", "T_NB_USER": "app",
           "T_NB_UNNAMED": "kept-out"}
    env.pop(PASS_ENV_VARIABLE, None)
    with running("rlm", env=env) as (_, kc):
        script_model(kc, [block(SHOW), block(SHOW)], executor="isolated", follow_ups=False)
        reply, _ = execute(kc, "%config RLM.pass_env = 'T_NB_HOST'")
        assert reply["content"]["status"] == "ok", reply["content"]
        reply, _ = execute(kc, "What do you see?")
        assert reply["content"]["status"] == "ok", reply["content"]
        seen = printed_json(kc, "import json; print(json.dumps(rlm_answer))")
        assert seen == ["db.internal.example", None, None]
        reply, _ = execute(kc, "%config RLM.pass_env = []")
        assert reply["content"]["status"] == "ok", reply["content"]
        execute(kc, "What do you see?")
        assert printed_json(kc, "import json; print(json.dumps(rlm_answer))") == \
            [None, None, None]
