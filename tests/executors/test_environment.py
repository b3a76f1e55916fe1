"""The environment of model code's processes is an allow-list
(:mod:`rlm_kernel.executors.environment`): what Python and the helpers need, HOME set
to a safe folder, and the variables the user names; nothing else of the host's,
whatever it is called."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rlm_kernel.executors.environment import (
    PASS_ENV_VARIABLE,
    SAFE_HOME,
    model_code_environ,
    passed_names,
)
from rlm_kernel.executors.workfolder import run_command

HOST = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
        "PYTHONPATH": "/opt/lib", "PYTHONSTARTUP": "/home/u/start.py", "HOME": "/home/u",
        "DB_PASS": "hunter2-long-password", "SERVICE_URL": "postgres://u:pw@db/x",
        "OPENAI_API_KEY": "sk-0123456789abcdef", "LD_PRELOAD": "/lib/evil.so",
        "PYTHONBREAKPOINT": "os.system", "TMPDIR": "/home/u/tmp"}


def test_only_the_allowed_variables_pass_whatever_the_others_are_called():
    env = model_code_environ(environ=HOST)
    assert env == {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                   "TZ": "UTC", "PYTHONPATH": "/opt/lib", "HOME": SAFE_HOME}


def test_named_variables_pass_and_are_listed_for_the_processes_model_code_starts():
    env = model_code_environ("DB_PASS, SERVICE_URL MISSING_ONE", environ=HOST)
    assert env["DB_PASS"] == HOST["DB_PASS"] and env["SERVICE_URL"] == HOST["SERVICE_URL"]
    assert "MISSING_ONE" not in env and "OPENAI_API_KEY" not in env
    assert env[PASS_ENV_VARIABLE] == "DB_PASS,MISSING_ONE,SERVICE_URL"
    # a process started with that environment passes the same names on
    again = model_code_environ(environ={**env, "EXTRA_VAR": "not passed"})
    assert again["DB_PASS"] == HOST["DB_PASS"] and "EXTRA_VAR" not in again


def test_the_hosts_rlm_pass_env_names_variables_too():
    env = model_code_environ(environ={**HOST, PASS_ENV_VARIABLE: "DB_PASS"})
    assert env["DB_PASS"] == HOST["DB_PASS"] and "SERVICE_URL" not in env


@pytest.mark.parametrize("bad", ["DB-PASS", "1ABC", "A=B", "$HOME"])
def test_a_name_that_is_no_variable_name_is_refused(bad):
    with pytest.raises(ValueError, match="pass_env"):
        passed_names(bad, environ={})


def test_a_working_folder_command_gets_the_allow_list(tmp_path, monkeypatch):
    monkeypatch.setenv("DB_PASS", "hunter2-long-password")
    monkeypatch.setenv("PLAIN_SETTING", "kept-out")
    monkeypatch.delenv(PASS_ENV_VARIABLE, raising=False)
    done = run_command(["env"], cwd=str(tmp_path), timeout=10, max_chars=100_000)
    names = {line.split("=", 1)[0] for line in done.output.splitlines() if "=" in line}
    assert "DB_PASS" not in names and "PLAIN_SETTING" not in names
    assert "PATH" in names and f"HOME={SAFE_HOME}" in done.output.splitlines()


def test_python_starts_with_that_environment():
    """The allow-list is enough for the interpreter that runs the worker."""
    env = model_code_environ()
    out = subprocess.run([sys.executable, "-c", "import os; print(os.environ['HOME'])"],
                         env=env, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == SAFE_HOME
