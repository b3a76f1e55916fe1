"""Run the fault suite (``tests/faults``) as an unprivileged uid from a root session.

As root, the isolated executor's wall and the limits of a run take other paths than for
an ordinary user (a cgroup, the sandbox's host uid chosen by root, ...), and a user's
session cannot reach what root's can: the interpreter of a pyenv under ``/root`` (mode
0700), the venv made from it, the checkout and the model's cache when they are under
``/root`` too.  :func:`run_as_user` runs ``python -m pytest tests/faults`` as an
ordinary uid with the same interpreter, venv and checkout, without changing any file's
owner or mode:

1. a work folder of the uid's own under the temporary folder: its ``HOME``, ``TMPDIR``,
   pytest's ``--basetemp`` and the JUnit XML report (``--junitxml``), none shared with
   root's (pytest refuses a ``/tmp/pytest-of-USER`` owned by another uid);
2. the sandbox's own launcher for a root caller (:mod:`rlm_kernel.executors.launcher`)
   then makes a private mount namespace in which a ``tmpfs`` of mode 0755 covers each
   folder the uid cannot search on the way to a tree the suite reads (such as
   ``/root``), binds each such tree back at its own path (idmapped and read-only where
   the uid could not list it), drops to the uid, its gid, no supplementary group, no
   capability and ``no_new_privs``, and executes ``python -m pytest``.  Nothing changes
   outside the namespace, and it ends with the run.

The fault suite's ``conftest.py`` records, as properties of the report's test suite,
the uid the tests ran as (:data:`RECORDED`): :func:`judge` reads it back, so a run that
did not drop to the uid is seen.  ``python -m tests.faults.as_user [PYTEST ARGS]`` does
the same by hand (as root, from the project's root folder).
"""

from __future__ import annotations

import codecs
import json
import os
import pwd
import re
import select
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The project's root folder (the one holding ``pyproject.toml``)."""
FAULTS = Path(__file__).resolve().parent
"""The fault suite's folder (``tests/faults``)."""
UID_VARIABLE = "RLM_TEST_UID"
"""An environment variable naming the uid to run as (else :func:`ordinary_user`)."""
RECORDED = ("euid", "egid", "groups")
"""The properties the fault suite's ``conftest.py`` records in the JUnit XML report
(``record_testsuite_property``): the effective uid and gid and the supplementary
groups of the process the tests ran in."""
SUITE = [str(FAULTS.relative_to(ROOT)),
         f"--ignore={(FAULTS / 'test_as_user.py').relative_to(ROOT)}"]
"""pytest's arguments for the fault suite but the module that runs it as the uid."""
SUITE_SECONDS = 3600
"""Seconds the suite's run as the uid may take: 14 minutes for 438 tests on 2 cores
that other work shared; 16 minutes for 587 tests beside the root run of the same suite
(which took 18 minutes beside it, 12 to 13 alone)."""
_DROPPED = ("HOME", "TMPDIR", "TMP", "TEMP", "USER", "LOGNAME", "MAIL", "PWD", "OLDPWD",
            "RLM_CACHE_DIR", "IPYTHONDIR", "PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS")
"""Variables of root's environment that name root's folders or this pytest session."""


@dataclass(frozen=True)
class User:
    """The unprivileged uid the fault suite runs as."""

    uid: int
    gid: int
    name: str | None
    """Its passwd name; None for a uid with no passwd entry."""

    def __str__(self) -> str:
        return f"uid {self.uid} ({self.name or 'no passwd entry'})"


def _login_defs(key: str, default: int) -> int:
    try:
        text = Path("/etc/login.defs").read_text()
    except OSError:
        return default
    found = re.search(rf"^\s*{key}\s+(\d+)", text, re.MULTILINE)
    return int(found.group(1)) if found else default


def _has_processes(uid: int) -> bool:
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    return True
            except OSError:
                continue
    return False


def ordinary_user() -> User:
    """The uid to run as: ``$RLM_TEST_UID`` when set; else the first user of the
    ordinary range of ``/etc/login.defs`` (``UID_MIN``..``UID_MAX``, 1000..60000 by
    default) with a passwd entry; else the first uid of that range with neither a
    passwd nor a group entry nor a process, which then runs without a name (its gid is
    the same number).

    Raises:
        ValueError: ``$RLM_TEST_UID`` is not a positive integer.
        LookupError: no uid of the range fits.
    """
    low, high = _login_defs("UID_MIN", 1000), _login_defs("UID_MAX", 60000)
    if (given := os.environ.get(UID_VARIABLE)) is not None:
        if not given.isdigit() or int(given) == 0:
            raise ValueError(f"${UID_VARIABLE}={given!r} is not a uid other than 0")
        uid = int(given)
        try:
            entry = pwd.getpwuid(uid)
            return User(uid, entry.pw_gid, entry.pw_name)
        except KeyError:
            return User(uid, uid, None)
    users = sorted((e for e in pwd.getpwall() if low <= e.pw_uid <= high), key=lambda e: e.pw_uid)
    if users:
        return User(users[0].pw_uid, users[0].pw_gid, users[0].pw_name)
    import grp

    gids = {g.gr_gid for g in grp.getgrall()}
    for uid in range(low, high + 1):
        if uid not in gids and not _has_processes(uid):
            return User(uid, uid, None)
    raise LookupError(f"no uid between {low} and {high} is free")


def _outermost(paths: list[str]) -> list[str]:
    kept: list[str] = []
    for path in sorted(set(paths), key=len):
        if not any(path == k or path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return kept


def needed_trees() -> list[str]:
    """The folders the fault suite reads (symbolic links resolved): the interpreter's
    installation, the venv, every folder of ``sys.path``, the checkout, and the
    embedded model's cache when its weights are prepared (the slow tests of
    ``test_fault_server.py`` start the real server)."""
    wanted = [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable)), str(ROOT)]
    wanted += [p for p in sys.path if p]
    weights = _weights()
    if weights is not None:
        wanted.append(str(weights.parent))
    found = []
    for path in wanted:
        real = os.path.realpath(path)
        if os.path.isfile(real):  # a zip on sys.path
            real = os.path.dirname(real)
        if os.path.isdir(real) and real != "/":
            found.append(real)
    return _outermost(found)


def _weights() -> Path | None:
    """The embedded model's verified weights, when prepared."""
    from rlm_kernel.models.local.weights import get_spec, is_prepared, weights_path

    spec = get_spec()
    return weights_path(spec).resolve() if is_prepared(spec) else None


@dataclass
class InnerRun:
    """How the fault suite's run as the uid ended."""

    command: list[str]
    """The command run as root (the launcher's, then pytest's)."""
    rc: int | None
    """pytest's exit status; None when it was still running at the time limit (killed)."""
    output: str
    """pytest's output (stdout and stderr)."""
    seconds: float
    report: ET.Element | None
    """The JUnit XML report's ``testsuite`` element, or None when none was written."""
    user: User | None = None
    """The uid it ran as (None: not recorded)."""

    @property
    def properties(self) -> dict[str, str]:
        """The test suite's properties (:data:`RECORDED`)."""
        if self.report is None:
            return {}
        return {p.get("name", ""): p.get("value", "")
                for p in self.report.iter("property")}

    def count(self, what: str) -> int:
        """The report's count of ``tests``, ``failures``, ``errors`` or ``skipped``."""
        return int(self.report.get(what, 0)) if self.report is not None else 0

    def failed(self) -> list[str]:
        """``NODE: MESSAGE`` for each test the report says failed or errored (the
        message's first line)."""
        if self.report is None:
            return []
        found = []
        for case in self.report.iter("testcase"):
            for bad in (*case.findall("failure"), *case.findall("error")):
                node = case.get("classname", "").replace(".", "/") + ".py::" + case.get("name", "")
                message = (bad.get("message") or bad.text or "").strip().splitlines()
                found.append(f"{bad.tag.upper()} {node}: {message[0] if message else ''}")
        return found

    def summary(self, lines: int = 40) -> str:
        """The failed tests (:meth:`failed`, at most ``lines``) and pytest's last line;
        the output's last ``lines`` lines when the report names no failure."""
        text = self.output.splitlines()
        failed = self.failed()
        if not failed:
            return "\n".join(text[-lines:])
        more = [f"... and {len(failed) - lines} more"] if len(failed) > lines else []
        return "\n".join([*failed[:lines], *more, text[-1] if text else ""])


def read_report(path: Path) -> ET.Element | None:
    """The ``testsuite`` element of the JUnit XML report at ``path`` (pytest's
    ``--junitxml``), or None when there is none."""
    if not path.exists():
        return None
    root = ET.parse(path).getroot()
    return root if root.tag == "testsuite" else root.find("testsuite")


def _environment(user: User, home: Path, tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in _DROPPED and not k.startswith(("XDG_", "JUPYTER_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1",
               LITELLM_LOCAL_MODEL_COST_MAP="True")
    if user.name:
        env.update(USER=user.name, LOGNAME=user.name)
    return env


def _prepare_home(home: Path) -> None:
    """The uid's model cache (``~/.cache/rlm-kernel``): a link to root's verified weights
    and a copy of their stamp, as a user whose cache holds them."""
    weights = _weights()
    if weights is None:
        return
    cache = home / ".cache" / "rlm-kernel"
    cache.mkdir(parents=True)
    (cache / weights.name).symlink_to(weights)
    stamp = weights.with_name(weights.name + ".verified")
    shutil.copy(stamp, cache / stamp.name)


def run_as_user(pytest_args: list[str], user: User | None = None, *,
                timeout: float = 3600, log=None,
                cancel: threading.Event | None = None) -> InnerRun:
    """Run ``python -m pytest PYTEST_ARGS`` (from the project's root folder) as ``user``
    (:func:`ordinary_user` when None) as described in the module docstring; wait at
    most ``timeout`` seconds, then kill it and every process below it.

    Args:
        pytest_args: arguments after ``pytest`` (paths, ``-m``, ``-k`` ...); the run
            adds ``--basetemp``, ``--junitxml`` and ``-p no:cacheprovider``.
        user: the uid to run as.
        timeout: seconds.
        log: a text file that receives pytest's output as it comes (besides
            :attr:`InnerRun.output`), or None.
        cancel: when set, the run is killed as on the timeout (within 5 s).

    Raises:
        PermissionError: not root.
    """
    from rlm_kernel.executors.sandbox import LAUNCHER

    from .t4_support import kill_tree

    if os.geteuid() != 0:
        raise PermissionError("only root can run the fault suite as another uid")
    user = user or ordinary_user()
    work = Path(tempfile.mkdtemp(prefix="rlm-as-user-")).resolve()
    try:
        os.chmod(work, 0o755)  # our own new folder: the uid passes through it
        own = work / "user"
        home, tmp = own / "home", own / "tmp"
        for folder in (own, home, tmp):
            folder.mkdir(mode=0o700)
        _prepare_home(home)
        for folder, _dirs, files in os.walk(own):
            for name in [folder, *(os.path.join(folder, f) for f in files)]:
                os.lchown(name, user.uid, user.gid)
        junit = own / "junit.xml"
        config = {"uid": user.uid, "gid": user.gid, "reach": [*needed_trees(), str(own)],
                  "workdir": None, "cgroups": []}
        command = [sys.executable, "-I", "-S", LAUNCHER, json.dumps(config), "--",
                   sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                   f"--basetemp={tmp / 'pytest'}", f"--junitxml={junit}", *pytest_args]
        env = _environment(user, home, tmp)
        started = time.monotonic()
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            output = _read(proc, log, started + timeout, cancel)
            if not (cancel and cancel.is_set()):
                proc.wait(timeout=max(0.1, started + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        finally:
            rc = proc.poll()
            if rc is None:
                kill_tree(proc.pid)
            proc.wait()
        took = time.monotonic() - started
        return InnerRun(command, rc, output, took, read_report(junit), user)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def start_as_user(pytest_args: list[str], user: User | None = None, *,
                  timeout: float = 3600) -> tuple[Future[InnerRun], threading.Event]:
    """:func:`run_as_user` started in a thread of its own, to run beside this session's
    own tests: the fault suite waits on its subprocesses and sleeps more than it
    computes (a load under 1 on 2 cores), so its run as root and its run as the uid
    take about as long side by side as one alone.

    Returns:
        The run's future (:class:`InnerRun`, or the exception it raised) and the event
        that cancels it.
    """
    cancel = threading.Event()
    pool = ThreadPoolExecutor(1, thread_name_prefix="fault-suite-as-user")
    future = pool.submit(run_as_user, pytest_args, user, timeout=timeout, cancel=cancel)
    pool.shutdown(wait=False)
    return future, cancel


def _read(proc: subprocess.Popen, log, deadline: float,
          cancel: threading.Event | None = None) -> str:
    """``proc``'s output until it closes it, ``deadline`` (a ``time.monotonic()``
    value) passes or ``cancel`` is set, copied to ``log`` (a text file, or None) as it
    comes."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    fd, parts = proc.stdout.fileno(), []
    while (left := deadline - time.monotonic()) > 0 and not (cancel and cancel.is_set()):
        if not select.select([fd], [], [], min(5.0, left))[0]:
            continue
        data = os.read(fd, 1 << 16)
        text = decoder.decode(data, final=not data)
        parts.append(text)
        if log is not None:
            log.write(text)
            log.flush()
        if not data:
            break
    return "".join(parts)


def judge(run: InnerRun, user: User) -> str | None:
    """Why ``run`` does not show the suite passing as ``user``, or None when it does: it
    ended with status 0, its report counts tests that ran and no failure or error, and
    its tests recorded running with ``user``'s uid and gid and no supplementary group
    (:data:`RECORDED`)."""
    if run.rc is None:
        return (f"the run as {user} was still running after {run.seconds:.0f} s (killed):\n"
                f"{run.summary()}")
    problems = []
    ran = run.count("tests") - run.count("skipped")
    if run.rc != 0 or run.count("failures") or run.count("errors") or ran <= 0:
        problems.append(
            f"pytest as {user} exited {run.rc} after {run.seconds:.0f} s "
            f"({run.count('tests')} tests, {run.count('failures')} failed, "
            f"{run.count('errors')} errors, {run.count('skipped')} skipped):\n{run.summary()}")
    recorded = {k: run.properties.get(k) for k in RECORDED}
    if ran > 0 and recorded != {"euid": str(user.uid), "egid": str(user.gid), "groups": ""}:
        problems.append(f"the tests did not record running as {user} with gid {user.gid} "
                        f"and no other group: they recorded {recorded}")
    return "\n".join(problems) or None


def main(argv: list[str] | None = None) -> int:
    """``python -m tests.faults.as_user [PYTEST ARGS]``: the fault suite (or the given
    paths) as :func:`ordinary_user`, its output as it comes; exit 0 only when it ran as
    that uid and passed with tests collected."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not any(not a.startswith("-") for a in args):
        args += SUITE
    user = ordinary_user()
    print(f"running {shlex.join(['pytest', *args])} as {user}", flush=True)
    run = run_as_user(args, user, log=sys.stdout)
    problem = judge(run, user)
    print(problem or f"ran as {user}: {run.count('tests')} tests, passed "
          f"({run.seconds:.0f} s)")
    return 1 if problem else 0


if __name__ == "__main__":
    sys.exit(main())
