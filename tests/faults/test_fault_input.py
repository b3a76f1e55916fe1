"""Input the user gets wrong: one readable line each, nothing lost."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rlm_kernel import cli
from rlm_kernel.jupyter.prose import is_prose

CONTEXT = os.path.join(os.path.dirname(__file__), "helpers.py")


@pytest.mark.parametrize("args,message", [
    (["--max-iterations", "0"], "must be at least 1"),
    (["--max-iterations", "-1"], "must be at least 1"),
    (["--max-iterations", "many"], "expected a whole number"),
    (["--step-timeout", "0"], "must be more than 0"),
    (["--max-cost", "nan"], "must be more than 0"),
    (["--bogus-flag"], "unrecognized arguments"),
])
def test_bad_run_options_give_a_usage_line(args, message, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--context", CONTEXT, *args, "What is it?"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "usage: rlm" in err
    assert "Traceback" not in err


def test_an_empty_question_is_refused(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--context", CONTEXT, "   "])
    assert exc.value.code == 2
    assert "the question is empty" in capsys.readouterr().err


def test_a_fifo_context_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    proc = subprocess.run([sys.executable, "-m", "rlm_kernel.cli", "run", "--context", str(fifo),
                           "What is in it?"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "not a regular file or folder" in proc.stderr and "Traceback" not in proc.stderr


def test_a_folder_without_text_files_is_refused(tmp_path, capsys):
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2" * 100)
    assert cli.main(["run", "--context", str(tmp_path), "What is in it?"]) == 2
    assert "no text files under" in capsys.readouterr().err


@pytest.mark.parametrize("line,message", [
    ("--max-iterations 0 What?", "must be at least 1"),
    ("--max-iterations -1 What?", "must be at least 1"),
    ("--no-such-option What?", "unknown option --no-such-option"),
])
def test_bad_magic_options_are_one_usage_error(ip, line, message):
    ip.user_ns["context"] = "kept"
    result = ip.run_cell(f"%rlm {line}")
    error = result.error_in_exec
    assert type(error).__name__ == "UsageError"
    assert message in str(error) and "usage: %rlm" in str(error)
    assert ip.user_ns["context"] == "kept"


@pytest.mark.parametrize("text", ["improt os", "retrun value", "form os import path",
                                  "whlie True", "pritn x"])
def test_typos_of_keywords_stay_python(text):
    assert not is_prose(text)


@pytest.mark.parametrize("text", ["timeit sum(range(10))", "pip show pip", "time 1 + 1"])
def test_automagics_stay_ipython_when_automagic_is_on(ip, text):
    magics = set(ip.magics_manager.magics["line"])
    assert not is_prose(text, magics=magics)


@pytest.mark.parametrize("text", ["Which file defines wrap?",
                                  "Form a summary of the log, please",
                                  "now count the lines in the log please",
                                  "Return the longest line of the file."])
def test_tasks_are_still_tasks(text):
    assert is_prose(text)
