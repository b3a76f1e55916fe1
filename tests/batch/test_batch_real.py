"""``rlm batch`` on the real embedded model, as a user runs it: the command, a
LocalCluster of 2 worker processes, two small tasks.  Both workers ask for the embedded
model's server; they share one (its state file and start lock), never start two."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import psutil
import pytest

pytestmark = pytest.mark.slow

PEOPLE = "\n".join(f"{name} lives in {city}." for name, city in [
    ("Ana", "Porto"), ("Marta", "Lisbon"), ("Joao", "Braga"), ("Rui", "Faro"),
    ("Ines", "Evora"), ("Tiago", "Coimbra")]) + "\n"


def llama_servers(root: psutil.Process) -> set[int]:
    """Process ids of llama.cpp servers below ``root``."""
    found = set()
    for proc in root.children(recursive=True):
        try:
            if "llama_cpp.server" in " ".join(proc.cmdline()):
                found.add(proc.pid)
        except psutil.Error:
            continue
    return found


def test_a_batch_on_the_embedded_model_answers_and_its_workers_share_one_server(tmp_path):
    (tmp_path / "people.txt").write_text(PEOPLE)
    rows = [{"id": "city", "question": "In which city does Marta live? Answer with the "
             "city's name only.", "context": "people.txt"},
            {"id": "count", "question": "How many people does the file list? Answer with "
             "a number.", "context": "people.txt", "returns": "int"}]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "results.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlm_kernel.cli", "batch", str(tasks), "--out", str(out),
         "--cluster", "local:2", "--max-iterations", "6", "--no-progress"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()
    most = 0

    def watch() -> None:
        nonlocal most
        root = psutil.Process(proc.pid)
        while proc.poll() is None:
            now = llama_servers(root)
            seen.update(now)
            most = max(most, len(now))
            threading.Event().wait(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        _, err = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
    watcher.join(5)
    lines = {line["id"]: line for line in map(json.loads, out.read_text().splitlines())}
    assert sorted(lines) == ["city", "count"], err
    assert "lisbon" in (lines["city"]["answer"] or "").lower(), (lines["city"], err)
    assert lines["count"]["answer_value"] == 6, (lines["count"], err)
    assert proc.returncode == 0, err
    assert all(line["worker"].startswith("tcp://") for line in lines.values())
    assert most <= 1 and len(seen) <= 1, f"llama.cpp servers started by the workers: {seen}"
