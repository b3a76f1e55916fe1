"""``rlm model serve --replicas N``: N embedded llama.cpp servers and the fleet file for
them, used by a run through litellm's Router (``RLM(router=...)``)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest
import yaml

from rlm_kernel import RLM
from rlm_kernel.models import find_running, fleet_yaml, load_fleet

ROOT = Path(__file__).resolve().parents[2]
RLM_CMD = [sys.executable, "-m", "rlm_kernel.cli"]


def test_the_fleet_file_of_replicas():
    text = fleet_yaml("local-fleet", ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"],
                      model="openai/qwen")
    data = yaml.safe_load(text)
    fleet = load_fleet(data)
    assert fleet.model_names == ["local-fleet"]
    assert [d["model_info"]["id"] for d in data["model_list"]] == ["local-fleet-1",
                                                                   "local-fleet-2"]
    assert [d["litellm_params"]["api_base"] for d in data["model_list"]] == [
        "http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    assert {d["litellm_params"]["max_parallel_requests"] for d in data["model_list"]} == {1}
    assert data["router_settings"]["routing_strategy"] == "least-busy"


@pytest.mark.parametrize("args, message", [
    (["status", "--replicas", "2"], "--replicas and --fleet-file go with"),
    (["serve", "--fleet-file", "x.yaml"], "--replicas and --fleet-file go with"),
    (["serve", "--replicas", "0"], "--replicas must be at least 1, got 0"),
])
def test_replica_options_out_of_place_are_one_error(args, message):
    done = subprocess.run([*RLM_CMD, "model", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


def _closed(api_base: str) -> bool:
    port = urlparse(api_base).port
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except OSError:
        return True


@pytest.mark.slow
def test_serve_two_replicas_and_run_through_their_fleet(tmp_path):
    """Two llama.cpp servers on 2 cores (each with one core), a short run whose root
    steps and sub-call go through the Router; Ctrl-C stops both, and the single server
    other processes find is not one of them."""
    fleet_file = tmp_path / "fleet.yaml"
    single = find_running()
    proc = subprocess.Popen([*RLM_CMD, "model", "serve", "--replicas", "2", "--fleet-file",
                             str(fleet_file)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 300
        while not fleet_file.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert fleet_file.exists(), proc.stderr.read() if proc.poll() is not None else "slow"
        fleet = load_fleet(fleet_file)
        bases = [d["litellm_params"]["api_base"] for d in fleet.model_list]
        assert len(bases) == 2 and len(set(bases)) == 2
        running = find_running()
        assert (running and running.pid) == (single and single.pid)  # not a replica
        task = ("Call llm_query to ask: 'What is the capital of France? Answer with one "
                "word.' Then call FINAL with its reply.")
        result = RLM(model="local-fleet", router=str(fleet_file), max_iterations=3,
                     executor="in-process", cache=None).run(task)
        # the fleet's plumbing, not the small model's skill: every call went through the
        # Router to a replica and came back (whether it answered well is the benches' job)
        assert result.stopped_by in ("final", "max_iterations"), (result.stopped_by,
                                                                  result.error)
        assert result.calls and not any(c.error for c in result.calls)
        assert all(c.deployment in ("local-fleet-1", "local-fleet-2") for c in result.calls)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # no server is left running, whatever failed
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
            proc.kill()
            raise
    assert proc.returncode == 0, err
    assert yaml.safe_load(out) == yaml.safe_load(fleet_file.read_text())  # printed too
    assert all(_closed(base) for base in bases)
