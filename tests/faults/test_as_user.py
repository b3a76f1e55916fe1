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
from pathlib import Path

import pytest

from .as_user import FAULTS, ROOT, InnerRun, User, judge, ordinary_user, read_report, run_as_user

LIMIT = 3600
"""Seconds the run as the uid may take: it took 14 minutes for 438 tests on 2 cores that
other work shared (as root, the same suite: 12 to 13 minutes)."""


@pytest.mark.timeout(LIMIT + 120)
@pytest.mark.skipif(os.geteuid() != 0, reason=(
    f"nothing to add: the suite runs as an ordinary user (uid {os.geteuid()}), so the "
    f"fault tests of this session run as that uid already"))
def test_the_fault_suite_passes_as_an_unprivileged_uid(request):
    """Every fault test passes when run as an unprivileged uid from this root session,
    with the same interpreter, venv and checkout (reached through a private mount
    namespace where they are under a folder the uid cannot search, such as /root)."""
    user = ordinary_user()
    args = [str(FAULTS.relative_to(ROOT)), "-q",
            f"--ignore={Path(__file__).resolve().relative_to(ROOT)}"]
    if markexpr := request.config.getoption("markexpr"):
        args += ["-m", markexpr]  # `pytest -m "not slow"` leaves the slow ones out there too
    run = run_as_user(args, user, timeout=LIMIT)
    print(run.output)
    if problem := judge(run, user):
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
