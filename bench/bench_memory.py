"""Benchmark: memory and prompt speed of the embedded model server, before and after
``--logits_all False``.

Run by hand (about three minutes on 2 cores; nothing else should use the CPU, and
no other model server should run):

    .venv/bin/python bench/bench_memory.py [--prompt-tokens 4000] [--n-ctx 8192]

llama-cpp-python's server keeps the logits of every position by default
(``logits_all=True``): n_ctx x vocabulary x 4 bytes, about 5 GB for the 1.5B
Qwen model (8,192 x 151,936).  rlm-kernel starts it with ``--logits_all False``
(:func:`rlm_kernel.models.local.server.server_command`).  This starts the server
both ways, one after the other, with the same arguments otherwise; sends the same
prompt of about ``--prompt-tokens`` tokens (``/v1/completions``, a few completion
tokens, so the time is almost all prompt processing); and prints the server's
resident memory (``VmRSS`` idle and after the prompt; ``RssAnon``, the part that
is not the memory-mapped weights file; ``VmHWM``, the peak; from
``/proc/<pid>/status``, in GB of 10^9 bytes) and prompt tokens per second, with the
ratio after / before.  Target: at most 2.5 GB after.  It also checks the setting
changes no output: two chat prompts and the long prompt's continuation, at
temperature 0, must give the same text both ways.

One run (2 cores, Qwen2.5-Coder 1.5B Q4_K_M, n_ctx 8,192, a 4,017-token prompt):
RSS 5.10 -> 2.20 GB (of which not the weights file: 3.99 -> 1.09 GB), prompt
44.1 -> 55.5 tokens/s (all positions' logits cost a vocabulary-sized matrix
product each), replies identical 3/3.  Also tried, not adopted: ``--flash_attn``
(-0.08 GB, replies differ), ``--n_batch 256`` (-0.07 GB, same replies and speed).
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from rlm_kernel.models.local.server import ServerSettings, server_command
from rlm_kernel.models.local.weights import get_spec, prepare

TARGET_GB = 2.5
CHAT_PROMPTS = ["Write a Python function that returns the n-th Fibonacci number.",
                "In two sentences: what does a Python context manager do?"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _status_kb(pid: int, field: str) -> int:
    """One field of ``/proc/<pid>/status`` in kB (``VmRSS``, ``VmHWM``); 0 if absent."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _post(url: str, body: dict, timeout: float = 900) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def _start(logits_all: bool, n_ctx: int) -> tuple[subprocess.Popen, str, str]:
    """Start the server as rlm-kernel does, with ``--logits_all`` set as given."""
    spec = get_spec()
    port = _free_port()
    cmd = server_command(prepare(spec.name), spec.name, port, ServerSettings(n_ctx=n_ctx))
    cmd[cmd.index("--logits_all") + 1] = str(logits_all)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(f"{base}/models", timeout=2).read()
            return proc, base, spec.name
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the server did not start") from None
            time.sleep(0.5)


def measure(logits_all: bool, prompt: str, n_ctx: int) -> dict:
    """Start a server, send ``prompt``, return its memory (GB), prompt tokens/s and
    its replies at temperature 0 (the long prompt's first, then the chat prompts')."""
    proc, base, model = _start(logits_all, n_ctx)
    try:
        idle = _status_kb(proc.pid, "VmRSS")
        start = time.perf_counter()
        reply = _post(f"{base}/completions", {"model": model, "prompt": prompt,
                                              "max_tokens": 8, "temperature": 0})
        seconds = time.perf_counter() - start
        rss, peak = _status_kb(proc.pid, "VmRSS"), _status_kb(proc.pid, "VmHWM")
        anon = _status_kb(proc.pid, "RssAnon")
        texts = [reply["choices"][0]["text"]]
        for question in CHAT_PROMPTS:
            chat = _post(f"{base}/chat/completions", {
                "model": model, "temperature": 0, "max_tokens": 48,
                "messages": [{"role": "user", "content": question}]})
            texts.append(chat["choices"][0]["message"]["content"])
        tokens = reply["usage"]["prompt_tokens"]
        return {"idle_gb": idle / 1e6, "rss_gb": rss / 1e6, "anon_gb": anon / 1e6,
                "peak_gb": peak / 1e6,
                "tokens": tokens, "tok_s": tokens / seconds, "texts": texts}
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
    print(f"{'server':26} | {'idle GB':>8} {'RSS GB':>8} {'anon GB':>8} {'peak GB':>8} "
          f"{'prompt tok':>10} {'tok/s':>8}")
    print("-" * 87)
    for name, r in rows.items():
        print(f"{name:26} | {r['idle_gb']:8.2f} {r['rss_gb']:8.2f} {r['anon_gb']:8.2f} "
              f"{r['peak_gb']:8.2f} {r['tokens']:10d} {r['tok_s']:8.1f}")
    before, after = rows.values()
    same = sum(a == b for a, b in zip(before["texts"], after["texts"], strict=True))
    print("-" * 87)
    print(f"ratio after/before: RSS {after['rss_gb'] / before['rss_gb']:.2f}, peak "
          f"{after['peak_gb'] / before['peak_gb']:.2f}, prompt speed "
          f"{after['tok_s'] / before['tok_s']:.2f}; target RSS <= {TARGET_GB} GB: "
          f"{'met' if after['rss_gb'] <= TARGET_GB else 'NOT met'}")
    print(f"replies at temperature 0 identical before/after: {same}/{len(before['texts'])}")


if __name__ == "__main__":
    main()
