"""The fault suite as an ordinary user, when the suite runs as root.

Root's runs take other paths than a user's (a cgroup, the sandbox's uid mapped from
root, owner bits of root's files); CI runs ``make test`` as root.  So that a regression
for either uid shows, this test runs ``python -m pytest tests/faults`` (all of it but
this module) again as an unprivileged uid (:mod:`tests.faults.as_user`) and passes only
when that run passed, with tests that ran, as that uid."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from .as_user import FAULTS, ROOT, SUITE_SECONDS, InnerRun, User, judge, read_report


@pytest.mark.timeout(SUITE_SECONDS + 120)
@pytest.mark.skipif(os.geteuid() != 0, reason=(
    f"nothing to add: the suite runs as an ordinary user (uid {os.geteuid()}), so the "
    f"fault tests of this session run as that uid already"))
def test_the_fault_suite_passes_as_an_unprivileged_uid(as_user_run):
    """Every fault test passes when run as an unprivileged uid from this root session,
    with the same interpreter, venv and checkout (reached through a private mount
    namespace where they are under a folder the uid cannot search, such as /root).

    The run started beside this session's first fault test (``as_user_run``, in
    conftest.py) and is judged here, after the last one."""
    run = as_user_run.result(timeout=SUITE_SECONDS + 60)
    print(run.output)
    if problem := judge(run, run.user):
        pytest.fail(problem, pytrace=False)


def test_a_run_that_kept_another_uid_is_refused(tmp_path):
    """The uid check is not vacuous: a real run of a fault module, which passed as this
    process's uid, is refused as a run of another uid, and what it recorded is named."""
    junit = tmp_path / "junit.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"--basetemp={tmp_path / 'basetemp'}", f"--junitxml={junit}",
                           str((FAULTS / "test_fault_input.py").relative_to(ROOT))],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    run = InnerRun(done.args, done.returncode, done.stdout, 0.0, read_report(junit))
    assert done.returncode == 0 and run.count("tests") > 0, done.stdout[-2000:]
    assert run.properties["euid"] == str(os.geteuid())
    other = User(os.geteuid() + 1, os.getegid(), None)
    problem = judge(run, other)
    assert problem is not None and "did not record running as uid" in problem
    assert f"'euid': '{os.geteuid()}'" in problem
