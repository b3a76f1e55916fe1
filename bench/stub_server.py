"""A stub model deployment for the scale-out bench: an OpenAI-compatible chat server on
127.0.0.1 in its own process, answering after a fixed latency with a bounded number of
slots.

It stands in for one model server (a llama.cpp server with ``--slots`` slots, a vLLM
replica, one key of a provider): every ``POST .../chat/completions`` waits for a free
slot (requests beyond ``--slots`` queue, as on a llama.cpp server with one slot), holds
it for ``--latency`` seconds, and gets a valid ``chat.completion`` with ``usage``.  It
runs in a process of its own so that the measured side (the RLM runs, the Dask workers)
does not share a GIL with it.

What it replies (no model, so each reply is scripted by the request's shape):

* a **root step** (the run's task message holds the question) gets one short
  ```` ```repl ```` block that does a bit of work on ``context``, makes one sub-call with
  ``llm_query`` and calls ``FINAL``: one root step and one sub-call per task.  A
  question holding ``[batched:N]`` gets instead a block that calls
  ``llm_query_batched`` of N prompts, times it inside the step and prints
  ``batched N in S s``, then ``FINAL`` (``[batched:N:TAG]``: the prompts name ``TAG``,
  so that a cache of sub-calls answers none of them);
* a **sub-call** (its prompt starts with ``SUB:``) gets a short text.

``GET /stats`` returns ``{"requests", "root", "sub", "peak", "in_flight", "waiting",
"peak_waiting"}`` (``peak``: most requests holding a slot at once); ``POST /reset``
forgets the counts.

Run alone::

    .venv/bin/python bench/stub_server.py --latency 0.5 --slots 4 [--port 0]

It prints ``listening http://127.0.0.1:<port>/v1`` once it serves, and stops on SIGTERM
or Ctrl-C.  From Python, :class:`StubDeployment` starts it and stops it.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # openai_stub (sibling module)

from openai_stub import StubChatServer  # noqa: E402

logger = logging.getLogger(__name__)

SUB_MARK = "SUB:"
BATCHED = re.compile(r"\[batched:(\d+)(?::(\w+))?\]")
USAGE = (60, 20)  # (prompt_tokens, completion_tokens) reported with every reply

ROOT_REPLY = """I count the words, ask the helper once, and answer.
```repl
words = len(str(context).split())
note = llm_query(f"SUB: one line on a text of {words} words")
answer = f"{words} words; {note}"
print(answer)
FINAL(answer)
```"""

BATCHED_REPLY = """I ask the helper {n} questions at once.
```repl
import time
t0 = time.perf_counter()
replies = llm_query_batched([f"SUB: part {{i}} of {tag}" for i in range({n})])
elapsed = time.perf_counter() - t0
ok = sum(r.startswith("ok") for r in replies)
print(f"batched {{len(replies)}} in {{elapsed:.3f}} s, {{ok}} ok")
FINAL(f"{{ok}} of {{len(replies)}} ok")
```"""


def reply_for(messages: list[dict[str, Any]]) -> tuple[str, str]:
    """The stub's reply to one chat request.

    Args:
        messages: the request's chat messages (``role``/``content`` dicts).

    Returns:
        ``(kind, text)``: kind ``"sub"`` or ``"root"`` and the assistant's text.
    """
    last = str(messages[-1].get("content", "")) if messages else ""
    if last.startswith(SUB_MARK):
        return "sub", f"ok ({last[len(SUB_MARK):].strip()[:40]})"
    task = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "user")
    found = BATCHED.search(task)
    if found:
        return "root", BATCHED_REPLY.format(n=int(found.group(1)), tag=found.group(2) or "run")
    return "root", ROOT_REPLY


def serve(latency: float, slots: int, port: int = 0) -> StubChatServer:
    """The server itself (run by :func:`main` in the stub's own process): the shared
    :class:`~openai_stub.StubChatServer` replying :func:`reply_for`, counting ``root``
    and ``sub`` requests.

    Args:
        latency: seconds each request holds its slot.
        slots: requests served at once; the others wait for a slot.
        port: TCP port on 127.0.0.1 (0: a free one).

    Raises:
        ValueError: ``latency`` < 0 or ``slots`` < 1.
        OSError: the port cannot be bound.
    """
    def reply(request: dict[str, Any]) -> str:
        kind, text = reply_for(list(request.get("messages") or []))
        server.count(kind)
        return text

    server = StubChatServer(reply, delay=latency, usage=USAGE, slots=slots, port=port,
                            kinds=("root", "sub"))
    return server


class StubDeployment:
    """One stub server in a process of its own (``python bench/stub_server.py ...``).

    Args:
        latency: seconds each request holds a slot.
        slots: requests served at once (1: like a llama.cpp server with one slot).
        start_timeout: seconds to wait for the process to serve.

    Use as a context manager; :attr:`base_url` is the litellm ``api_base``.

    Raises:
        RuntimeError: (on enter) the process did not start serving in time.
    """

    def __init__(self, latency: float, slots: int, start_timeout: float = 20.0) -> None:
        self.latency = latency
        self.slots = slots
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.base_url = ""

    def start(self) -> StubDeployment:
        """Start the process and wait for its ``listening`` line; returns ``self``."""
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--latency", str(self.latency),
             "--slots", str(self.slots)], stdout=subprocess.PIPE, text=True)
        found: list[str] = []

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            found.append(self.proc.stdout.readline())

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(self.start_timeout)
        line = found[0].strip() if found else ""
        if not line.startswith("listening "):
            self.stop()
            raise RuntimeError(f"the stub server did not start (got {line!r})")
        self.base_url = line.split(" ", 1)[1]
        return self

    def _call(self, method: str, path: str) -> dict[str, Any]:
        req = urllib.request.Request(self.base_url + path, method=method,
                                     data=b"{}" if method == "POST" else None)
        with urllib.request.urlopen(req, timeout=10) as resp:
            return dict(json.load(resp))

    def stats(self) -> dict[str, int]:
        """The server's counts since the last :meth:`reset` (see the module docstring)."""
        return {k: int(v) for k, v in self._call("GET", "/stats").items()}

    def reset(self) -> None:
        """Forget the counts."""
        self._call("POST", "/reset")

    def stop(self) -> None:
        """Terminate the process and wait for it (killed after 5 s)."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> StubDeployment:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM or Ctrl-C (the command line of the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.5, help="seconds per request")
    parser.add_argument("--slots", type=int, default=1, help="requests served at once")
    parser.add_argument("--port", type=int, default=0, help="port (0: a free one)")
    args = parser.parse_args(argv)
    try:
        server = serve(args.latency, args.slots, args.port)
    except (ValueError, OSError) as exc:
        parser.error(str(exc))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(
        target=server.httpd.shutdown, daemon=True).start())
    print(f"listening http://127.0.0.1:{server.port}/v1", flush=True)
    try:
        server.httpd.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()


if __name__ == "__main__":
    main()
