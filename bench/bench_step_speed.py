"""Seconds per step of the embedded model's server, today's settings against others.

Run by hand (the real model; about a minute per task and server setting on 2 cores):

    .venv/bin/python bench/bench_step_speed.py [--per-kind 1] [--kinds k1,k2]
        [--max-iterations 6] [--configs today,draft,...]

Starts one llama-cpp-python server per server setting (``--configs``, from
:data:`CONFIGS`; ``today`` is the baseline, llama-cpp-python's own reuse of the previous
request's prefix only), all at once, each with ``--verbose True`` so its log says
how much of each prompt it reused.  Every dev task (``evals``, ``--per-kind`` /
``--kinds`` as in ``bench_accuracy.py``) then runs through ``rlm_kernel.RLM`` on
each server in turn, side by side (task 1 on every server, then task 2 ...), at
temperature 0 with the default ``RLMConfig`` otherwise, so that load on the machine
hits every setting alike.

Per request the bench records: seconds; tokens sent (the reply's ``usage``); tokens
the server evaluated (``remaining N prompt tokens to eval`` in its log after a
prefix hit, 0 after an exact hit, else all of them); tokens generated.  Printed: one
row per setting with requests, median and mean seconds per step (a root-model call
plus its code), median seconds per request, tokens sent / evaluated / generated per
request, prompt evaluation and generation speed (tokens/s, a least-squares fit over
the requests), correct answers, peak resident memory, and the ratio of median seconds per step
against ``today``; then, per setting, how many tasks had every root reply identical
to ``today``'s (temperature 0: a setting that only changes speed must keep them).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_accuracy import judge, load_tasks  # noqa: E402

from rlm_kernel import RLM, RLMConfig  # noqa: E402
from rlm_kernel.models.litellm_client import LiteLLMClient  # noqa: E402
from rlm_kernel.models.local.launcher import ServerSettings, free_port, server_command  # noqa: E402
from rlm_kernel.models.local.weights import get_spec, prepare  # noqa: E402

GB = 1 << 30
CONFIGS: dict[str, ServerSettings] = {
    "today": ServerSettings(verbose=True),
    "draft4": ServerSettings(verbose=True, draft_tokens=4),
    "draft10": ServerSettings(verbose=True, draft_tokens=10),
    "cache": ServerSettings(verbose=True, prompt_cache_bytes=2 * GB),
    "draft4+cache": ServerSettings(verbose=True, draft_tokens=4, prompt_cache_bytes=2 * GB),
}
_REMAINING = re.compile(r"remaining (\d+) prompt tokens to eval")
_EXACT = "full prompt already cached"


@dataclass
class Request:
    role: str
    seconds: float
    sent: int
    evaluated: int
    generated: int
    reply: str


@dataclass
class Server:
    name: str
    settings: ServerSettings
    proc: subprocess.Popen
    base: str
    log: Path
    requests: list[Request] = field(default_factory=list)
    steps: list[float] = field(default_factory=list)
    correct: int = 0
    peak_gb: float = 0.0
    replies: dict[str, list[str]] = field(default_factory=dict)


class MeteredClient(LiteLLMClient):
    """A client of one bench server that reads, after each request, what the server's
    log says it evaluated."""

    def __init__(self, server: Server, model: str, **kwargs: Any) -> None:
        super().__init__(f"openai/{model}", api_base=server.base, api_key="local",
                         priced=False, num_retries=0, **kwargs)
        self.server = server

    def complete(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        offset = self.server.log.stat().st_size
        done = super().complete(messages, **kwargs)
        with self.server.log.open("rb") as fh:
            fh.seek(offset)
            text = fh.read().decode("utf-8", "replace")
        found = _REMAINING.findall(text)
        call = done.call
        evaluated = 0 if _EXACT in text else int(found[-1]) if found else call.prompt_tokens
        self.server.requests.append(Request(kwargs.get("role", "root"), call.seconds,
                                            call.prompt_tokens, evaluated,
                                            call.completion_tokens, done.text))
        return done


def start(name: str, settings: ServerSettings, model: str) -> Server:
    """Start one server with ``settings``; wait until it answers."""
    port = free_port()
    log = Path(tempfile.mkstemp(prefix=f"bench-{name}-", suffix=".log")[1])
    cmd = server_command(prepare(model), model, port, settings)
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(f"{base}/models", timeout=2).read()
            return Server(name, settings, proc, base, log)
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"server {name} did not start: {log.read_text()[-800:]}") \
                    from None
            time.sleep(0.5)


def run_task(task: Any, server: Server, model: str, cfg: RLMConfig) -> None:
    """One task on one server; its steps' seconds, answer and root replies recorded."""
    root = MeteredClient(server, model, temperature=cfg.temperature,
                         max_tokens=cfg.max_step_tokens)
    sub = MeteredClient(server, model, temperature=cfg.temperature,
                        max_tokens=cfg.max_sub_tokens)
    first = len(server.requests)
    with contextlib.redirect_stdout(io.StringIO()):
        res = RLM(config=cfg, root_client=root, sub_client=sub).run(task.question,
                                                                    context=task.context)
    server.correct += judge(task, res.answer)
    mine = server.requests[first:]
    server.replies[str(task.id)] = [r.reply for r in mine if r.role != "sub"]
    # A step: its root call plus its code's time (sub-calls run inside the code).
    roots = [r for r in mine if r.role != "sub"]
    for request, entry in zip(roots, res.history.entries, strict=False):
        server.steps.append(request.seconds + entry.execution_time)


def peak_gb(pid: int) -> float:
    """The process's peak resident memory (``VmHWM``), in GB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1e6
    return float("nan")


def speeds(reqs: list[Request]) -> tuple[float, float]:
    """Prompt evaluation and generation speed (tokens/s) of a server: the least-squares
    fit of ``seconds = evaluated / p + generated / g + overhead`` over its requests
    (NaN with fewer than 4 requests or a fit that is not positive)."""
    import numpy as np

    if len(reqs) < 4:
        return float("nan"), float("nan")
    a = np.array([[r.evaluated, r.generated, 1.0] for r in reqs])
    y = np.array([r.seconds for r in reqs])
    (per_eval, per_gen, _), *_ = np.linalg.lstsq(a, y, rcond=None)
    return (1 / per_eval if per_eval > 0 else float("nan"),
            1 / per_gen if per_gen > 0 else float("nan"))


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def report(servers: list[Server], tasks: int) -> None:
    print(f"{'server':14} | {'reqs':>4} {'step med s':>10} {'step mean':>9} {'req med s':>9} "
          f"{'sent/req':>8} {'eval/req':>8} {'gen/req':>7} {'eval t/s':>8} {'gen t/s':>7} "
          f"{'correct':>7} {'peak GB':>7} | {'ratio':>5}")
    print("-" * 124)
    base = median(servers[0].steps)
    for s in servers:
        reqs = s.requests
        prompt_speed, gen_speed = speeds(reqs)
        print(f"{s.name:14} | {len(reqs):4d} {median(s.steps):10.2f} "
              f"{mean(s.steps):9.2f} "
              f"{median([r.seconds for r in reqs]):9.2f} "
              f"{mean([r.sent for r in reqs]):8.0f} "
              f"{mean([r.evaluated for r in reqs]):8.0f} "
              f"{mean([r.generated for r in reqs]):7.0f} {prompt_speed:8.1f} {gen_speed:7.1f} "
              f"{s.correct:3d}/{tasks:<3d} {s.peak_gb:7.2f} | {base / median(s.steps):5.2f}x")
    print("-" * 124)
    today = servers[0].replies
    for s in servers[1:]:
        same = sum(s.replies.get(k) == v for k, v in today.items())
        print(f"{s.name}: root replies identical to today's on {same}/{len(today)} tasks")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kinds", default=None, help="comma-separated kinds to keep")
    parser.add_argument("--per-kind", type=int, default=1, metavar="N")
    parser.add_argument("--max-iterations", type=int, default=6)
    parser.add_argument("--configs", default="today,draft4,cache",
                        help=f"server settings to compare, first is the baseline "
                             f"(known: {', '.join(CONFIGS)})")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.configs.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown config(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else None
    tasks, _ = load_tasks("dev", None, kinds, args.per_kind)
    model = get_spec(None).name
    cfg = RLMConfig().replace(max_iterations=args.max_iterations, temperature=0.0)
    servers = [start(n, CONFIGS[n], model) for n in names]
    print(f"{len(tasks)} dev tasks x {len(servers)} server settings, model {model}, "
          f"{os.cpu_count()} CPUs, max iterations {cfg.max_iterations}")
    for s in servers:
        print(f"  {s.name}: {s.settings}")
    try:
        for n, task in enumerate(tasks, 1):
            for s in servers:
                run_task(task, s, model, cfg)
            print(f"[{n}/{len(tasks)}]", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print("interrupted: the table covers the tasks done so far", file=sys.stderr)
    finally:
        for s in servers:
            s.peak_gb = peak_gb(s.proc.pid)
            s.proc.kill()
            s.proc.wait()
    report(servers, len(tasks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
