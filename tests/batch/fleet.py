"""What the batch and map tests run on: a real local OpenAI-compatible server
(bench/openai_stub.py) whose every reply is one step of code that sleeps for the
seconds its context names and answers with the rest of the context in capitals, reached
through litellm as ``openai/gpt-4o-mini`` by ``OPENAI_API_BASE``; and a Dask
``LocalCluster`` of worker processes that inherit that environment."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.openai_stub import fake_provider

MODEL = "openai/gpt-4o-mini"
PROMPT_TOKENS = 100_000
"""Reported per call: litellm prices it (gpt-4o-mini, $0.15 per million) at $0.015."""

REPLY = """```repl
import time
delay, _, text = context.partition(":")
time.sleep(float(delay))
FINAL(text.strip().upper())
```"""

SETTINGS: dict[str, Any] = {"model": MODEL, "executor": "in-process", "ground_answer": False}
"""The runs' settings: code in the worker's process (no sandbox to start per task)."""

CLI_SETTINGS = ["--model", MODEL, "--executor", "in-process", "--no-ground-answer",
                "--no-progress"]


@contextmanager
def provider_env() -> Iterator[list[int]]:
    """The fake provider served, and ``OPENAI_API_BASE`` / ``OPENAI_API_KEY`` set in this
    process's environment (start Dask workers inside, so they inherit it).

    Yields:
        The provider's list of requests so far.
    """
    with fake_provider(lambda n: REPLY, prompt_tokens=PROMPT_TOKENS) as (base, seen), \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_BASE", base)
        mp.setenv("OPENAI_API_KEY", "sk-test")
        mp.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        yield seen


@contextmanager
def local_cluster(n_workers: int = 2) -> Iterator[Any]:
    """A Dask ``LocalCluster`` of ``n_workers`` processes (one thread each) and its
    client; both closed on exit."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        yield client


def write_tasks(folder: Path, contexts: dict[str, str], **extra: Any) -> Path:
    """A tasks file in ``folder``: one task per ``{id: context text}``, each context in
    its own file (``<id>.txt``, named relative to the tasks file); ``extra`` keys go into
    every row."""
    rows = []
    for task_id, text in contexts.items():
        (folder / f"{task_id}.txt").write_text(text)
        rows.append({"id": task_id, "question": "Say it loudly.",
                     "context": f"{task_id}.txt", **extra})
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The result lines of a results file (split at "\n" only, as JSON Lines are: an
    answer may hold U+2028, which ``splitlines`` splits)."""
    return [json.loads(line) for line in path.read_text().split("\n") if line.strip()]


def worker_pids(client: Any) -> dict[str, int]:
    """``{worker address: process id}`` of the cluster's workers."""
    return client.run(os.getpid)


def batch(client: Any, tasks: Path, out: Path, *more: str) -> int:
    """``rlm batch`` on ``client``'s cluster (by its scheduler's address, as a real
    cluster is reached), with :data:`CLI_SETTINGS`; its exit code."""
    from rlm_kernel.cli import main

    return main(["batch", str(tasks), "--out", str(out), "--cluster",
                 client.scheduler.address, *CLI_SETTINGS, *more])
