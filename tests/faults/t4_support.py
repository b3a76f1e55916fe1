"""Support for the fault suite of ``../shared/fault-cases-t4/`` (``test_fault_t4*.py``).

* :func:`run_isolated`: a scripted run behind the process wall (one step per code);
* :func:`host_child`: a scenario that may hang or freeze the host runs as a *child host*
  (a new Python process that imports the test module and calls one of its functions),
  judged from outside within a time limit; a child still running then is killed with
  every process below it (the isolated workers it started among them), and the peak
  resident memory of the child is watched while it runs;
* :data:`CHANNEL`: model code that finds the worker's channel to the host without
  knowing the executor's internals (any socket of the worker process) and writes raw
  bytes on it: whatever the wire format, model code can always do that;
* :func:`cli_command`: ``rlm run`` over a scripted model in a child process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
"""The project's root folder (the one holding ``pyproject.toml``)."""
RESULT = "T4RESULT "
"""How the line a child host reports its findings on begins (then one JSON object)."""
BASE = "T4BASE "
"""How the line a child host reports its peak resident memory (kB) on before its
scenario begins."""
SECRET = "sk-test-0123456789abcdefSECRET"


def run_isolated(*codes: str, question: str = "question", context: Any = "some data",
                 executor: Any = None, output_type: Any = None, **cfg: Any):
    """A scripted run of ``codes`` (one step each) behind the process wall, with a 2 s
    step limit as the cases' ``h.run`` has; returns (result, model, seconds)."""
    from tests.replies import block
    from tests.scripted import scripted_rlm

    from .helpers import THOUGHT

    cfg.setdefault("step_timeout", 2)
    cfg.setdefault("executor", "isolated")
    rlm, lm = scripted_rlm([block(c, THOUGHT) for c in codes], **cfg)
    extra: dict[str, Any] = {}
    if executor is not None:
        extra["executor"] = executor
    if output_type is not None:
        extra["output_type"] = output_type
    started = time.monotonic()
    res = rlm.run(question, context=context, **extra)
    return res, lm, time.monotonic() - started


def summary(res: Any, lm: Any = None, took: float | None = None) -> dict[str, Any]:
    """What a child host reports of a run (plain data)."""
    out: dict[str, Any] = {
        "answer": None if res.answer is None else str(res.answer)[:500],
        "stopped_by": res.stopped_by, "error": None if res.error is None else str(res.error),
        "steps": res.steps, "llm_calls": res.llm_calls,
        "codes": [e.code for e in res.history.entries],
        "outputs": [e.output for e in res.history.entries]}
    if lm is not None:
        out["model_calls"] = len(lm.calls)
    if took is not None:
        out["took"] = took
    return out


# -- child hosts --------------------------------------------------------------------------------
def vm_kb(pid: int | str = "self", field: str = "VmHWM") -> int | None:
    """``field`` of /proc/PID/status in kB (VmHWM: the peak resident set), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def report(**data: Any) -> None:
    """In a child host: print the findings (one JSON line) for the test to judge."""
    data.setdefault("peak_kb", vm_kb())
    print(RESULT + json.dumps(data, default=str), flush=True)


def report_base() -> None:
    """In a child host: print the peak resident memory so far, before the scenario."""
    print(f"{BASE}{vm_kb()}", flush=True)


def _ppids() -> dict[int, int]:
    """Every process's parent, from /proc."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
                parents[int(name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return parents


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, theirs, ...), as /proc shows them now."""
    parents = _ppids()
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in found]
        found += kids
        todo += kids
    return found


def _cgroups(pid: int) -> set[str]:
    """The cgroup folders ``pid`` is in (v1 and v2)."""
    folders = set()
    try:
        for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if path in ("", "/"):
                continue
            for c in (controllers.split(",") if controllers else [""]):
                base = Path("/sys/fs/cgroup") / c.replace("name=", "") if c else Path(
                    "/sys/fs/cgroup")
                folders.add(str(base / path.lstrip("/")))
    except (OSError, ValueError):
        pass
    return folders


def kill_tree(pid: int) -> None:
    """Stop, then kill, ``pid`` and every process below it (an isolated worker lives
    in its own session and PID namespace: it outlives a killed host otherwise), and
    remove the cgroups they were put in that ``pid`` was not in."""
    own = _cgroups(pid)
    seen: set[int] = set()
    for _ in range(5):  # stopped processes fork no more; look again for late ones
        new = [p for p in [pid, *descendants(pid)] if p not in seen]
        if not new:
            break
        for p in new:
            seen.add(p)
            try:
                os.kill(p, signal.SIGSTOP)
            except OSError:
                pass
    groups = set().union(*(_cgroups(p) for p in seen)) - own if seen else set()
    for p in seen:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    for folder in groups:
        for _ in range(40):
            try:
                os.rmdir(folder)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


@dataclass
class ChildHost:
    """How a child host ended."""
    rc: int | None
    """Its exit status; None when it was still running at the time limit (killed)."""
    out: str
    err: str
    seconds: float
    peak_kb: int
    """The largest peak resident set (VmHWM) seen, the child's own report included."""

    @property
    def finished(self) -> bool:
        return self.rc is not None

    @property
    def result(self) -> dict[str, Any] | None:
        """The findings it reported (:func:`report`), or None."""
        lines = [ln for ln in self.out.splitlines() if ln.startswith(RESULT)]
        return json.loads(lines[-1][len(RESULT):]) if lines else None

    @property
    def base_kb(self) -> int | None:
        """Its peak resident set before the scenario (:func:`report_base`)."""
        lines = [ln for ln in self.out.splitlines() if ln.startswith(BASE)]
        try:
            return int(lines[-1][len(BASE):]) if lines else None
        except ValueError:
            return None

    def describe(self) -> str:
        state = f"exit {self.rc}" if self.finished else "still running (killed)"
        return (f"child host {state} after {self.seconds:.1f} s; stdout tail "
                f"{self.out[-600:]!r}; stderr tail {self.err[-1200:]!r}")


def host_child(target: str, timeout: float, *, env: dict[str, str] | None = None,
               argv: tuple[str, ...] = (), drop_env: tuple[str, ...] = ()) -> ChildHost:
    """Run ``target`` (``"module:function"``, importable from the project root) in a new
    Python process, the host under test; wait at most ``timeout`` seconds, then kill it
    and everything below it.  ``env`` is added to the environment (the child's *initial*
    environment, as /proc/PID/environ shows it); ``argv`` follows the script."""
    module, func = target.split(":")
    script = f"import {module} as m; m.{func}()"
    environ = {k: v for k, v in os.environ.items() if k not in drop_env}
    environ.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", **(env or {})})
    environ["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), *([environ["PYTHONPATH"]] if environ.get("PYTHONPATH") else [])])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-c", script, *argv], cwd=ROOT, env=environ,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        peak = 0
        try:
            while proc.poll() is None and time.monotonic() - started < timeout:
                peak = max(peak, vm_kb(proc.pid) or 0)
                time.sleep(0.05)
            peak = max(peak, vm_kb(proc.pid) or 0)
        finally:
            rc = proc.poll()
            if rc is None:
                kill_tree(proc.pid)
            proc.wait()
        took = time.monotonic() - started
        out.seek(0)
        err.seek(0)
        child = ChildHost(rc, out.read().decode(errors="replace"),
                          err.read().decode(errors="replace"), took, peak)
    reported = (child.result or {}).get("peak_kb")
    if isinstance(reported, int):
        child.peak_kb = max(child.peak_kb, reported)
    return child


def leftover(marker: bytes) -> list[int]:
    """Processes whose command line holds ``marker``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                if marker in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(int(name))
            except OSError:
                pass
    return found


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# -- model code that writes on the channel --------------------------------------------------
CHANNEL = r'''
import os, select, socket, stat
def channel_fds():
    """This process's sockets: the channel to the host is one of them, whatever its
    wire format; model code owns the worker process and may write on any of them."""
    fds = []
    for name in os.listdir('/proc/self/fd'):
        try:
            if stat.S_ISSOCK(os.fstat(int(name)).st_mode):
                fds.append(int(name))
        except (OSError, ValueError):
            pass
    return fds
def write_raw(fd, data, seconds=30):
    """Write all of data on fd (raw bytes, past any framing), for at most seconds."""
    view, end = memoryview(data), __import__('time').monotonic() + seconds
    while view and __import__('time').monotonic() < end:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            select.select([], [fd], [], 0.5)
'''
"""Model code (a prelude): ``channel_fds()`` and ``write_raw(fd, data)``."""


FRAMINGS = {"u32": 4, "u64": 8, "msgpack": 0}
"""Plausible wire formats: a 4- or 8-byte big-endian length before each frame, or a
stream of msgpack objects (whose ``bin 32`` carries its own 4-byte length)."""


def forged_header(size: int, framing: str) -> bytes:
    """A frame header announcing ``size`` bytes in ``framing`` (:data:`FRAMINGS`)."""
    width = FRAMINGS[framing]
    return size.to_bytes(width, "big") if width else b"\xc6" + size.to_bytes(4, "big")


# -- rlm run ---------------------------------------------------------------------------------------
CLI_DRIVER = r'''
import json, os, sys
import rlm_kernel.engine as engine
from rlm_kernel.models.scripted import ScriptedModel
replies = json.loads(os.environ["T4_REPLIES"])
print("T4HOSTPKG", __import__("rlm_kernel").__file__, file=sys.stderr, flush=True)
real = engine.RLM
class Scripted(real):
    def __init__(self, *args, **kwargs):
        lm = ScriptedModel(["Trying something.\n```repl\n%s\n```" % c for c in replies])
        super().__init__(*args, root_client=lm, sub_client=lm, **kwargs)
engine.RLM = Scripted
from rlm_kernel.cli import main
sys.exit(main(["run", "--model", "openai/scripted", "--step-timeout", "2",
               "--no-ground-answer", *sys.argv[1:], "q"]))
'''
"""``python -c CLI_DRIVER ARGS...``: ``rlm run ARGS`` (the real entry point) over a scripted
model answering the code steps of ``$T4_REPLIES`` (a JSON list)."""


def cli_command(replies: list[str], *args: str, python: str = sys.executable,
                cwd: str | os.PathLike[str] = ROOT, timeout: float = 60,
                pythonpath: bool = True) -> tuple[int | None, str, str]:
    """``rlm run ARGS`` over a scripted model in a child process (killed with what it
    started after ``timeout`` s): (exit status or None, stdout, stderr)."""
    env = {**os.environ, "T4_REPLIES": json.dumps(replies), "RLM_MODEL": "openai/scripted",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PYTHONPATH", None)
    if pythonpath:
        env["PYTHONPATH"] = str(ROOT)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([python, "-c", CLI_DRIVER, *args], cwd=cwd, env=env,
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(proc.pid)
            proc.wait()
            rc = None
        out.seek(0)
        err.seek(0)
        return rc, out.read().decode(errors="replace"), err.read().decode(errors="replace")


def one_json(text: str) -> dict[str, Any] | None:
    """The object if ``text`` is exactly one strict (RFC 8259) JSON object, else None."""
    def strict(token: str) -> Any:
        raise ValueError(f"not JSON: {token}")
    try:
        obj = json.loads(text.strip(), parse_constant=strict)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None
