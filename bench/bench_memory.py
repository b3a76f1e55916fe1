"""Benchmark: memory and prompt speed of the embedded model server, before and after
``--logits_all False``.

Run by hand (about two minutes on 2 cores; nothing else should use the CPU):

    .venv/bin/python bench/bench_memory.py [--prompt-tokens 4000] [--n-ctx 8192]

llama-cpp-python's server keeps the logits of every position by default
(``logits_all=True``): n_ctx x vocabulary x 4 bytes, about 5 GB for the 1.5B
Qwen model (8,192 x 151,936).  rlm-kernel starts it with ``--logits_all False``
(``rlm_kernel.models.local.server``).  This starts the server both ways, one after the
other, with the same arguments otherwise; sends the same prompt of about
``--prompt-tokens`` tokens (``/v1/completions``, one completion token, so the time
is prompt processing); and prints the server's resident memory (``VmRSS`` after
the prompt, ``VmHWM`` the peak, from ``/proc``) and prompt tokens per second, with
the ratio after / before.  Target: at most 2.5 GB after.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from rlm_kernel.models.local.weights import get_spec, prepare

TARGET_GB = 2.5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _post(url: str, body: dict, timeout: float = 900) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def measure(logits_all: bool, prompt: str, n_ctx: int) -> dict[str, float]:
    """Start a server, send ``prompt``, return RSS/peak (GB) and prompt tokens/s."""
    spec = get_spec()
    path = prepare(spec.name)
    port = _free_port()
    threads = str(os.cpu_count() or 2)
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(path),
           "--model_alias", spec.name, "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", str(n_ctx), "--n_threads", threads, "--n_threads_batch", threads,
           "--verbose", "False", "--logits_all", str(logits_all)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                urllib.request.urlopen(f"{base}/models", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the server did not start") from None
                time.sleep(0.5)
        idle = _status_kb(proc.pid, "VmRSS")
        start = time.perf_counter()
        reply = _post(f"{base}/completions", {"model": spec.name, "prompt": prompt,
                                              "max_tokens": 1, "temperature": 0})
        seconds = time.perf_counter() - start
        tokens = reply["usage"]["prompt_tokens"]
        return {"idle_gb": idle / 1e6, "rss_gb": _status_kb(proc.pid, "VmRSS") / 1e6,
                "peak_gb": _status_kb(proc.pid, "VmHWM") / 1e6, "tokens": tokens,
                "tok_s": tokens / seconds}
    finally:
        proc.kill()
        proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompt-tokens", type=int, default=4000)
    parser.add_argument("--n-ctx", type=int, default=8192)
    args = parser.parse_args()
    # Python source tokenises at about 3.8 characters a token for this tokenizer.
    source = Path(json.__file__).read_text() * 20
    prompt = source[: int(args.prompt_tokens * 3.8)]
    rows = {"before (logits_all True)": measure(True, prompt, args.n_ctx),
            "after (logits_all False)": measure(False, prompt, args.n_ctx)}
    print(f"{'server':26} | {'idle GB':>8} {'RSS GB':>8} {'peak GB':>8} {'prompt tok':>10} "
          f"{'tok/s':>8}")
    print("-" * 78)
    for name, r in rows.items():
        print(f"{name:26} | {r['idle_gb']:8.2f} {r['rss_gb']:8.2f} {r['peak_gb']:8.2f} "
              f"{r['tokens']:10d} {r['tok_s']:8.1f}")
    before, after = rows.values()
    print("-" * 78)
    print(f"ratio after/before: RSS {after['rss_gb'] / before['rss_gb']:.2f}, peak "
          f"{after['peak_gb'] / before['peak_gb']:.2f}, prompt speed "
          f"{after['tok_s'] / before['tok_s']:.2f}; target RSS <= {TARGET_GB} GB: "
          f"{'met' if after['rss_gb'] <= TARGET_GB else 'NOT met'}")


if __name__ == "__main__":
    main()
