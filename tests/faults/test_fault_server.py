"""The embedded model server under killed clients and concurrent processes
(real llama.cpp server; each test uses its own cache folder, linked to the weights)."""

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

from rlm_kernel.models.local.weights import cache_dir, get_spec, is_prepared, weights_path

pytestmark = pytest.mark.slow

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
    return folder


def state(folder: Path) -> dict | None:
    try:
        return json.loads((folder / f"server-{get_spec().name}.json").read_text())
    except (OSError, ValueError):
        return None


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
        time.sleep(0.2)
    return predicate()


def spawn(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=os.environ.copy())


def test_a_client_killed_mid_generation_leaves_no_server(own_cache):
    client = spawn(START + GENERATE)
    try:
        assert client.stdout.readline().strip() == "generating"
        time.sleep(2)  # the server is generating now
        pid = state(own_cache)["pid"]
        assert alive(pid)
        client.send_signal(signal.SIGKILL)
        client.wait(timeout=10)
        assert wait_for(lambda: not alive(pid), 10), "the server outlived its killed client"
    finally:
        client.kill()
        if (s := state(own_cache)) and alive(s["pid"]):
            os.kill(s["pid"], signal.SIGKILL)


def test_a_busy_server_is_found_not_replaced_and_its_state_file_kept(own_cache):
    owner = spawn(START + GENERATE)
    try:
        assert owner.stdout.readline().strip() == "generating"
        time.sleep(2)
        first = state(own_cache)
        assert owner.poll() is None  # still generating
        second = subprocess.run(
            [sys.executable, "-c", START + "print(info.pid)"], capture_output=True, text=True,
            timeout=120, env=os.environ.copy())
        assert second.returncode == 0, second.stderr
        assert int(second.stdout.split()[-1]) == first["pid"]  # found, not a second server
        assert state(own_cache) == first  # the finder did not delete what it did not write
        assert alive(first["pid"]) and owner.poll() is None
    finally:
        owner.kill()
        owner.wait(timeout=10)
        if (s := state(own_cache)) and alive(s["pid"]):
            os.kill(s["pid"], signal.SIGKILL)
