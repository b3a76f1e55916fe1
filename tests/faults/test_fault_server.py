"""The embedded model server under killed clients and concurrent processes.

Fast cases use a stand-in server: a process whose command line names
``llama_cpp.server`` and whose port takes connections but never answers HTTP, as a
real server busy generating does.  Slow cases run the real llama.cpp server; each
test uses its own cache folder (its own state and lock files), linked to the weights.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlm_kernel.models.local import server
from rlm_kernel.models.local.weights import cache_dir, get_spec, is_prepared, weights_path

NAME = get_spec().name
# Stand-in for a busy server: listens, never accepts, never answers.
BUSY = ("import socket, time\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(16)\n"
        "print(s.getsockname()[1], flush=True)\n"
        "time.sleep(600)\n")
# In a client process: fail instead of starting a real server.
NO_START = ("from rlm_kernel.models.local import server\n"
            "def refuse(*a, **k):\n"
            "    raise SystemExit('tried to start a second server')\n"
            "server.prepare = refuse\n")
START = "from rlm_kernel.models.local.server import ensure_server\ninfo = ensure_server()\n"
GENERATE = (  # a raw completion that keeps counting: busy for minutes on 2 cores
    "import json, urllib.request\n"
    "body = json.dumps({'model': info.model, 'max_tokens': 4000, 'temperature': 0,\n"
    "    'prompt': ', '.join(str(i) for i in range(1, 40)) + ','})\n"
    "req = urllib.request.Request(info.api_base + '/completions', body.encode(),\n"
    "                             {'content-type': 'application/json'})\n"
    "print('generating', flush=True)\n"
    "urllib.request.urlopen(req, timeout=900).read()\n"
    "print('finished', flush=True)\n")


def state(folder: Path) -> dict | None:
    try:
        return json.loads((folder / f"server-{NAME}.json").read_text())
    except (OSError, ValueError):
        return None


def write_state(folder: Path, pid: int, port: int) -> dict:
    info = {"model": NAME, "port": port, "pid": pid, "n_ctx": 8192}
    (folder / f"server-{NAME}.json").write_text(json.dumps(info))
    return info


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:  # a zombie is dead for us
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def wait_for(predicate, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def spawn(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=os.environ.copy())


def kill_server_in(folder: Path) -> None:
    if (s := state(folder)) and alive(s["pid"]):
        os.kill(s["pid"], signal.SIGKILL)


@pytest.fixture()
def empty_cache(tmp_path, monkeypatch):
    """A cache folder of its own, without weights (nothing may start a real server)."""
    folder = tmp_path / "cache"
    folder.mkdir()
    monkeypatch.setenv("RLM_CACHE_DIR", str(folder))
    monkeypatch.setattr(server, "_servers", {})
    assert cache_dir() == folder
    return folder


@pytest.fixture()
def busy_server():
    """A stand-in busy server (see BUSY) started by "another process": (pid, port)."""
    proc = subprocess.Popen([sys.executable, "-c", BUSY, "llama_cpp.server"],
                            stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline())
    yield proc, port
    proc.kill()
    proc.wait()


@pytest.fixture()
def own_cache(tmp_path, monkeypatch):
    """A cache folder of its own (its own server state file), holding the real weights."""
    spec = get_spec()
    if not is_prepared(spec):
        pytest.fail("the embedded model is not prepared: run `rlm model prepare`")
    source = weights_path(spec)
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / source.name).symlink_to(source)
    shutil.copy(str(source) + ".verified", folder / (source.name + ".verified"))
    monkeypatch.setenv("RLM_CACHE_DIR", str(folder))
    assert cache_dir() == folder and is_prepared(spec)
    yield folder
    kill_server_in(folder)


# -- fast: discovery and the state file, with a stand-in server ---------------------

def test_a_busy_server_is_found_although_it_answers_no_http(empty_cache, busy_server,
                                                              monkeypatch):
    proc, port = busy_server
    written = write_state(empty_cache, proc.pid, port)
    info = server.ServerInfo(**written)
    assert not server.healthy(info, timeout=2.0)  # what the old 2 s health check saw
    assert server.find_running() == info

    def refuse(*args, **kwargs):
        raise AssertionError("ensure_server started a second server")

    monkeypatch.setattr(server, "prepare", refuse)
    assert server.ensure_server() == info
    assert state(empty_cache) == written


def test_a_second_process_finds_the_busy_server_and_keeps_its_state_file(empty_cache,
                                                                          busy_server):
    proc, port = busy_server
    written = write_state(empty_cache, proc.pid, port)
    other = subprocess.run([sys.executable, "-c", NO_START + START + "print(info.pid)"],
                           capture_output=True, text=True, timeout=60,
                           env=os.environ.copy())
    assert other.returncode == 0, other.stdout + other.stderr
    assert int(other.stdout.split()[-1]) == proc.pid  # found, not replaced
    assert state(empty_cache) == written  # its exit deleted nothing it did not write
    assert proc.poll() is None


def test_stop_server_leaves_another_process_server_and_state_file_alone(empty_cache,
                                                                          busy_server):
    proc, port = busy_server
    written = write_state(empty_cache, proc.pid, port)
    assert server.find_running() is not None
    assert server.stop_server() is False
    server.stop_all_servers()  # what atexit runs
    assert state(empty_cache) == written and proc.poll() is None


def test_a_state_file_whose_server_died_is_removed(empty_cache, busy_server):
    proc, port = busy_server
    write_state(empty_cache, proc.pid, port)
    proc.kill()
    proc.wait()
    assert server.find_running() is None
    assert state(empty_cache) is None


def test_a_state_file_naming_a_reused_pid_is_not_trusted(empty_cache, busy_server):
    _, port = busy_server  # the port takes connections, but the pid is not a server
    write_state(empty_cache, os.getpid(), port)
    assert server.find_running() is None
    assert state(empty_cache) is None


def test_a_stale_state_file_is_left_while_another_process_holds_the_start_lock(
        empty_cache, busy_server):
    proc, port = busy_server
    written = write_state(empty_cache, proc.pid, port)
    proc.kill()
    proc.wait()
    holder = spawn("import fcntl, sys, time\n"
                   f"fh = open({str(empty_cache / f'server-{NAME}.lock')!r}, 'a')\n"
                   "fcntl.flock(fh, fcntl.LOCK_EX)\nprint('locked', flush=True)\n"
                   "time.sleep(60)\n")
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        assert server.find_running() is None
        assert time.monotonic() - started < 2  # did not wait for the lock
        assert state(empty_cache) == written  # that process may be writing it
    finally:
        holder.kill()
        holder.wait()


# -- fast: the parent-death signal ---------------------------------------------------

PARENT = (  # starts a sleeper the way servers are started, from a thread that ends
    "import sys, threading, time\n"
    "from rlm_kernel.models.local import server\n"
    "out = []\n"
    "def start():\n"
    "    cmd = [sys.executable, '-c', 'import time; time.sleep(120)']\n"
    "    out.append(server.spawner.popen(server.with_parent_death(cmd)))\n"
    "t = threading.Thread(target=start); t.start(); t.join()\n"
    "print(out[0].pid, flush=True)\n"
    "time.sleep(120)\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_a_child_started_from_an_ended_thread_lives_until_its_process_is_killed():
    parent = spawn(PARENT)
    try:
        child = int(parent.stdout.readline())
        time.sleep(1.0)  # the starting thread has ended; the child must not have
        assert alive(child), "the child died with the thread that asked for it"
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert wait_for(lambda: not alive(child), 5), "the child outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()


def test_stop_server_stops_a_server_that_ignores_sigterm(empty_cache, monkeypatch):
    """A server busy generating waits for its request on SIGTERM; stop_server kills it
    after ``grace`` seconds and removes the state file it wrote."""
    cmd = [sys.executable, "-c", "import signal, time\n"
           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
           "time.sleep(120)\n", "llama_cpp.server"]
    proc = server.spawner.popen(server.with_parent_death(cmd), stdout=subprocess.PIPE,
                                 text=True)
    assert proc.stdout.readline().strip() == "ready"
    info = server.ServerInfo(model=NAME, port=1, pid=proc.pid, n_ctx=8192)
    server._servers[NAME] = (proc, info)
    server.write_state(get_spec(), info)
    started = time.monotonic()
    assert server.stop_server(grace=0.5) is True
    assert proc.poll() is not None and time.monotonic() - started < 5
    assert state(empty_cache) is None


# -- slow: the real server -------------------------------------------------------------

@pytest.mark.slow
def test_a_client_killed_mid_generation_leaves_no_server(own_cache):
    client = spawn(START + GENERATE)
    try:
        assert client.stdout.readline().strip() == "generating"
        time.sleep(2)  # the server is generating now
        pid = state(own_cache)["pid"]
        assert alive(pid)
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        assert wait_for(lambda: not alive(pid), 5), "the server outlived its killed client"
    finally:
        client.kill()
        client.wait()


@pytest.mark.slow
def test_a_busy_server_is_found_not_replaced_and_its_state_file_kept(own_cache):
    owner = spawn(START + GENERATE)
    try:
        assert owner.stdout.readline().strip() == "generating"
        time.sleep(2)
        first = state(own_cache)
        assert owner.poll() is None  # still generating
        second = subprocess.run(
            [sys.executable, "-c", NO_START + START + "print(info.pid)"], capture_output=True,
            text=True, timeout=120, env=os.environ.copy())
        assert second.returncode == 0, second.stdout + second.stderr
        assert int(second.stdout.split()[-1]) == first["pid"]  # found, not a second server
        assert state(own_cache) == first  # the finder did not delete what it did not write
        assert alive(first["pid"]) and owner.poll() is None
    finally:
        owner.kill()
        owner.wait(timeout=10)


@pytest.mark.slow
def test_a_client_that_exits_stops_its_server_and_removes_its_state_file(own_cache):
    client = subprocess.run([sys.executable, "-c", START + "print(info.pid)"],
                            capture_output=True, text=True, timeout=300,
                            env=os.environ.copy())
    assert client.returncode == 0, client.stdout + client.stderr
    pid = int(client.stdout.split()[-1])
    assert wait_for(lambda: not alive(pid), 5), "the server outlived its client's exit"
    assert state(own_cache) is None


@pytest.mark.slow
def test_the_embedded_client_restarts_a_server_that_dies_mid_request(own_cache, monkeypatch):
    import threading

    monkeypatch.setattr(server, "_servers", {})  # not the session's server
    client = server.LocalModelClient(NAME)
    count = [{"role": "user", "content": "Count from 1 to 80, comma separated."}]
    replies: list = []
    try:
        assert client.complete([{"role": "user", "content": "Say OK."}], max_tokens=4).text
        first = state(own_cache)["pid"]
        worker = threading.Thread(target=lambda: replies.append(
            client.complete(count, max_tokens=160)))  # ~8 s on 2 cores
        worker.start()
        time.sleep(2)
        assert worker.is_alive(), "the request ended before its server could be killed"
        os.kill(first, signal.SIGKILL)
        worker.join(timeout=300)
        assert replies and replies[0].text, "the request failed with its server"
        assert state(own_cache)["pid"] != first
    finally:
        server.stop_server()


@pytest.mark.slow
def test_a_kernel_killed_mid_generation_leaves_no_server(own_cache):
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="rlm", startup_timeout=60, env=os.environ.copy())
    try:
        kc.execute(START + GENERATE)  # not awaited: the kernel is busy until killed
        assert wait_for(lambda: state(own_cache) is not None, 120), "no server started"
        pid = state(own_cache)["pid"]
        time.sleep(3)  # the server is generating now
        os.kill(km.provisioner.process.pid, signal.SIGKILL)
        assert wait_for(lambda: not alive(pid), 5), "the server outlived its killed kernel"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
