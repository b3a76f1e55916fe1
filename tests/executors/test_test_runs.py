"""``run_tests()``: the folder's test command, its counts from pytest's JUnit XML, its
time limit, its detection rules, and the helper bound into both executors."""

from __future__ import annotations

import os
import shlex
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rlm_kernel.executors.test_runs import (
    TestCommandMissing,
    TestRun,
    find_test_command,
    run_tests,
)
from rlm_kernel.executors.workfolder import WorkFolder
from tests.replies import block
from tests.scripted import scripted_rlm

PYTEST = f"{shlex.quote(sys.executable)} -m pytest"
"""pytest of this interpreter as a command line: a bare ``pytest`` is whatever PATH finds,
which for an ordinary user may be another user's, unreadable."""


def _project(root: Path, body: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "test_sample.py").write_text(textwrap.dedent(body))
    return root


MIXED = """
    import pytest

    def test_one():
        assert 1 + 1 == 2

    def test_two():
        assert "a" * 2 == "aa"

    def test_wrong():
        assert 2 + 2 == 5

    @pytest.fixture
    def broken():
        raise RuntimeError("fixture fails")

    def test_error(broken):
        pass

    @pytest.mark.skip(reason="not today")
    def test_skipped():
        pass
"""


def test_counts_come_from_pytest_report(tmp_path: Path) -> None:
    run = run_tests(_project(tmp_path / "p", MIXED), timeout=120)
    assert (run.passed, run.failed, run.errors, run.skipped) == (2, 1, 1, 1)
    assert run.exit_code == 1 and not run.ok and not run.timed_out
    assert run.summary().startswith("2 passed, 1 failed, 1 errors, 1 skipped in ")
    assert str(run).splitlines()[0] == run.summary()
    assert run.to_dict()["ok"] is False


def test_a_passing_folder_is_ok(tmp_path: Path) -> None:
    run = run_tests(_project(tmp_path / "p", "def test_ok():\n    assert True\n"), timeout=120)
    assert (run.passed, run.failed, run.errors) == (1, 0, 0) and run.ok


def test_printed_summary_lines_do_not_change_the_counts(tmp_path: Path) -> None:
    body = """
        def test_lies():
            print("=== 99 passed in 0.01s ===")
            assert False, "really failed"
    """
    run = run_tests(_project(tmp_path / "p", body), f"{PYTEST} -s", timeout=120)
    assert (run.passed, run.failed) == (0, 1)
    assert run.command == [sys.executable, "-m", "pytest", "-s"]


def test_a_make_project_gives_its_status_without_counts(tmp_path: Path) -> None:
    (tmp_path / "Makefile").write_text("test:\n\t@echo checking; exit 3\n")
    assert find_test_command(tmp_path) == ["make", "test"]
    run = run_tests(tmp_path, timeout=60)
    assert run.exit_code != 0 and run.passed is None and "checking" in run.output
    assert not run.ok


def test_detection_by_configuration_and_the_missing_command(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "setup.cfg").write_text("[tool:pytest]\naddopts = -q\n")
    assert find_test_command(cfg)[1:] == ["-m", "pytest"]
    deep = tmp_path / "deep" / "src" / "pkg" / "tests"
    deep.mkdir(parents=True)
    (deep / "test_x.py").write_text("def test_x():\n    pass\n")
    assert find_test_command(tmp_path / "deep")[0] == sys.executable
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.txt").write_text("nothing to test")
    with pytest.raises(TestCommandMissing, match="test_command"):
        find_test_command(empty)
    with pytest.raises(ValueError, match="test_command"):
        WorkFolder(empty).run_tests()


def test_a_run_past_its_time_limit_is_killed_with_its_group(tmp_path: Path) -> None:
    marker = tmp_path / "p" / "still_running"
    body = f"""
        import subprocess, time

        def test_slow():
            subprocess.Popen(["sleep", "30"])
            time.sleep(30)
            open({str(marker)!r}, "w").write("no")
    """
    start = time.monotonic()
    run = run_tests(_project(tmp_path / "p", body), timeout=3)
    assert run.timed_out and not run.ok and time.monotonic() - start < 20
    time.sleep(0.5)
    assert not marker.exists()
    ours = [line for line in os.popen("ps -eo args").read().splitlines()
            if line.strip() == "sleep 30"]
    assert not ours


def test_the_tests_get_the_cut_environment(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_API_KEY", "sk-run-tests-canary-0451")
    monkeypatch.setenv("DB_HOST", "db.internal")
    body = """
        import os

        def test_env():
            print("seen:", sorted(os.environ))
            assert "SERVICE_API_KEY" not in os.environ
    """
    run = run_tests(_project(tmp_path / "p", body), f"{PYTEST} -s", timeout=120)
    assert run.ok and "sk-run-tests-canary-0451" not in run.output
    assert "DB_HOST" not in run.output
    passed = run_tests(tmp_path / "p", f"{PYTEST} -s", timeout=120, pass_env=["DB_HOST"])
    assert "DB_HOST" in passed.output and passed.ok


def test_long_output_is_cut(tmp_path: Path) -> None:
    body = """
        def test_loud():
            print("x" * 50_000)
            assert False
    """
    run = run_tests(_project(tmp_path / "p", body), f"{PYTEST} -s", timeout=120, max_chars=2000)
    assert run.cut > 40_000 and len(run.output) < 4000 and run.failed == 1


def test_bad_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a PATH whose folders this uid can search: one it cannot (root's, kept by setpriv)
    # makes a missing program EACCES instead of ENOENT
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(ValueError, match="empty"):
        run_tests(tmp_path, "", timeout=5)
    with pytest.raises(ValueError, match="timeout"):
        run_tests(tmp_path, "true", timeout=0)
    with pytest.raises(FileNotFoundError):
        run_tests(tmp_path, "no-such-program-here", timeout=5)


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_run_tests_in_a_run_of_each_executor(tmp_path: Path, executor: str) -> None:
    folder = _project(tmp_path / "work", MIXED)
    code = ("r = run_tests()\nprint(r)\n"
            "FINAL(f'{r.passed}/{r.failed}/{r.errors}/{type(r).__name__}')")
    rlm, lm = scripted_rlm([block(code)], workdir=str(folder), executor=executor,
                           max_iterations=2, test_timeout=120)
    result = rlm.run("Run the tests.")
    assert result.answer == "2/1/1/TestRun", result.error
    assert "2 passed, 1 failed, 1 errors" in result.history.entries[0].output
    assert any("- run_tests() -> TestRun" in m["content"] for m in lm.calls[0])


def test_the_setting_chooses_the_command(tmp_path: Path) -> None:
    folder = _project(tmp_path / "work", MIXED)
    rlm, _ = scripted_rlm([block("r = run_tests()\nFINAL(f'{r.passed}/{r.exit_code}')")],
                          workdir=str(folder), executor="in-process", max_iterations=2,
                          test_command=f"{PYTEST} -q -k 'one or two'")
    assert rlm.run("Run the tests.").answer == "2/0"


def test_the_result_type() -> None:
    run = TestRun(command=["make", "test"], passed=None, failed=None, errors=None,
                  skipped=None, exit_code=0, seconds=0.25, timed_out=False, output="ok\n")
    assert run.ok and run.summary() == "make test: exit 0 in 0.2 s"


CHILD_TRIES = """
found = []
for name, call in [("apply_patch", lambda: apply_patch("--- a/x\\n+++ b/x\\n")),
                   ("run_tests", run_tests)]:
    try:
        call()
    except PermissionError as exc:
        found.append(f"{name}: {exc}")
found.append(read("test_sample.py").strip().splitlines()[0])
FINAL(" | ".join(found))
"""


@pytest.mark.parametrize("executor", ["in-process", "isolated"])
def test_a_sub_agent_reads_the_folder_but_may_not_patch_or_test(tmp_path: Path,
                                                                executor: str) -> None:
    folder = _project(tmp_path / "work", MIXED)
    rlm, lm = scripted_rlm([block("a = rlm_query('Look at the tests.')\nFINAL(a)"),
                            block(CHILD_TRIES)],
                           workdir=str(folder), executor=executor, max_iterations=2,
                           child_max_iterations=2)
    result = rlm.run("Ask a sub-agent.")
    answer = result.answer or ""
    assert "apply_patch: apply_patch() is not available to a sub-agent" in answer, result
    assert "run_tests: run_tests() is not available to a sub-agent" in answer
    assert answer.endswith("| import pytest")
    child_prompt = "\n".join(m["content"] for m in lm.calls[1])
    assert "- read(" in child_prompt and "- bash(" in child_prompt
    assert "- apply_patch(" not in child_prompt and "- run_tests(" not in child_prompt
    assert "- apply_patch(" in "\n".join(m["content"] for m in lm.calls[0])
