"""The ``pass_env`` setting: the environment variables model code gets by name beyond
the allow-list (:mod:`rlm_kernel.executors.environment`), from every settings surface:
``RLM(pass_env=...)``, ``rlm run --pass-env``, and (tests/jupyter/test_magic_isolated.py)
``%%rlm --pass-env`` and ``c.RLM.pass_env``.  Scripted model; real worker processes in
the bubblewrap sandbox; real working-folder commands."""

from __future__ import annotations

import json

import pytest

from rlm_kernel.cli import build_parser, main
from rlm_kernel.engine import RLMConfig
from rlm_kernel.executors.environment import PASS_ENV_VARIABLE
from rlm_kernel.executors.workfolder import WorkFolder
from tests.replies import block
from tests.scripted import scripted_rlm

SHOW = ("import os\nseen = {n: os.environ.get(n) for n in "
        "('T_DB_HOST', 'T_DB_USER', 'T_UNNAMED', 'T_DEPLOY_TOKEN')}\n"
        "print(seen)\nFINAL(seen)")
"""Model code that answers with what it sees of four variables."""


@pytest.fixture()
def host_env(monkeypatch):
    """The host's variables: two to pass, one never named, one whose name is secret."""
    monkeypatch.delenv(PASS_ENV_VARIABLE, raising=False)
    monkeypatch.setenv("T_DB_HOST", "db.internal.example")
    monkeypatch.setenv("T_DB_USER", "app")
    monkeypatch.setenv("T_UNNAMED", "kept-out-value")
    monkeypatch.setenv("T_DEPLOY_TOKEN", "tok-0123456789abcdef")


def test_the_setting_takes_a_list_or_one_text_and_keeps_a_tuple():
    assert RLMConfig().pass_env == ()
    assert RLMConfig(pass_env=["T_B", "T_A"]).pass_env == ("T_A", "T_B")
    assert RLMConfig(pass_env="T_B, T_A T_A").pass_env == ("T_A", "T_B")
    assert RLMConfig().replace(pass_env="T_A").pass_env == ("T_A",)
    with pytest.raises(ValueError, match="'DB-HOST' is not the name of an environment"):
        RLMConfig(pass_env="DB-HOST")
    with pytest.raises(ValueError, match="pass_env cannot be None"):
        RLMConfig(pass_env=None)


def test_the_command_line_option_takes_names_separated_by_commas():
    args = build_parser().parse_args(["run", "--pass-env", "T_DB_HOST,T_DB_USER", "q"])
    assert args.pass_env == "T_DB_HOST,T_DB_USER"


def test_rlm_passes_the_named_variables_to_the_isolated_worker(host_env):
    rlm, _ = scripted_rlm([block(SHOW)], executor="isolated",
                          pass_env=["T_DB_HOST", "T_DB_USER", "T_DEPLOY_TOKEN"])
    res = rlm.run("What do you see?")
    assert res.stopped_by == "final", res.error
    seen = res.answer_value
    assert seen["T_DB_HOST"] == "db.internal.example" and seen["T_DB_USER"] == "app"
    assert seen["T_UNNAMED"] is None  # not named: not there
    # passed, so model code has it; its name looks secret, so no output shows it
    assert seen["T_DEPLOY_TOKEN"] == "tok-0123456789abcdef"
    assert "tok-0123456789abcdef" not in res.history.entries[0].output
    assert "[redacted T_DEPLOY_TOKEN]" in res.history.entries[0].output
    assert "tok-0123456789abcdef" not in (res.answer or "")


def test_without_the_setting_none_of_them_passes(host_env):
    rlm, _ = scripted_rlm([block(SHOW)], executor="isolated")
    seen = rlm.run("What do you see?").answer_value
    assert set(seen.values()) == {None}


def test_a_passed_value_that_is_a_known_secret_is_redacted(monkeypatch):
    """A plain name (no key filter would catch it) whose value the process knows as a
    secret (here remembered as a fleet's key): passed on request, redacted in output."""
    from rlm_kernel.redaction import remember_secret

    monkeypatch.setenv("T_LLM_CREDS", "creds-fedcba9876543210")
    remember_secret("creds-fedcba9876543210", "T_LLM_CREDS")
    rlm, _ = scripted_rlm([block("import os\nv = os.environ['T_LLM_CREDS']\nprint(v)\n"
                                 "FINAL(len(v))")], executor="isolated",
                          pass_env="T_LLM_CREDS")
    res = rlm.run("How long is it?")
    assert res.answer_value == len("creds-fedcba9876543210")
    output = res.history.entries[0].output
    assert "creds-fedcba9876543210" not in output and "[redacted T_LLM_CREDS]" in output


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_the_working_folders_commands_get_them(tmp_path, host_env, executor):
    code = "print(bash('env'))\nFINAL('done')"
    rlm, _ = scripted_rlm([block(code)], executor=executor, workdir=str(tmp_path),
                          pass_env="T_DB_HOST")
    output = rlm.run("Show the environment.").history.entries[0].output
    lines = output.splitlines()
    assert "T_DB_HOST=db.internal.example" in lines, output
    assert not [line for line in lines if line.startswith(("T_DB_USER=", "T_UNNAMED="))]


def test_a_work_folder_checks_the_names(tmp_path):
    assert WorkFolder(tmp_path, pass_env="T_A T_B").pass_env == ("T_A", "T_B")
    with pytest.raises(ValueError, match="'1X' is not the name"):
        WorkFolder(tmp_path, pass_env=["1X"])


def test_rlm_run_pass_env_reaches_the_isolated_worker(tmp_path, host_env, capsys):
    """The command line: a recorded run's step replayed in the isolated REPL with
    ``--pass-env``, and again without it."""
    rlm, _ = scripted_rlm([block(SHOW)], executor="in-process")
    path = tmp_path / "run.json"
    path.write_text(json.dumps(rlm.run("What do you see?").to_dict()))
    answers = []
    for extra in (["--pass-env", "T_DB_HOST T_DB_USER"], []):
        rc = main(["run", "--replay", str(path), "--json", "--executor", "isolated",
                   "--no-ground-answer", "--returns", "dict", *extra])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0 and out["stopped_by"] == "final", out
        answers.append(out["answer_value"])
    named, unnamed = answers
    assert named["T_DB_HOST"] == "db.internal.example" and named["T_DB_USER"] == "app"
    assert named["T_UNNAMED"] is None and named["T_DEPLOY_TOKEN"] is None
    assert set(unnamed.values()) == {None}


def test_the_environments_rlm_pass_env_still_names_more(host_env, monkeypatch):
    monkeypatch.setenv(PASS_ENV_VARIABLE, "T_DB_USER")
    rlm, _ = scripted_rlm([block(SHOW)], executor="isolated", pass_env="T_DB_HOST")
    seen = rlm.run("What do you see?").answer_value
    assert seen["T_DB_HOST"] == "db.internal.example" and seen["T_DB_USER"] == "app"
    assert seen["T_UNNAMED"] is None


def test_an_rlm_query_child_in_its_own_worker_gets_them_too(host_env):
    child = "import os\nFINAL(os.environ.get('T_DB_HOST'))"
    rlm, _ = scripted_rlm([block("FINAL(rlm_query('look'))"), block(child)],
                          executor="isolated", pass_env="T_DB_HOST", max_depth=1)
    res = rlm.run("Ask a child.")
    assert res.answer == "db.internal.example", res.error
