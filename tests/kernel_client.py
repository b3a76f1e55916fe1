"""Talking to a real kernel started by jupyter_client: run cells, collect their IOPub
messages, announce the frontend; and, for fault cases, script the model inside it."""

from __future__ import annotations

import json
import queue
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from jupyter_client.manager import start_new_kernel

# the one block(); imported from here too (../shared/fault-cases/kern.py)
from tests.replies import block as block
from tests.scripted import SCRIPTED_SETTINGS

THOUGHT = "Trying."
"""The reasoning line of the replies the kernel tests script (``block(code, THOUGHT)``)."""


def start(kernel_name: str = "rlm", **kwargs: Any):
    """Start a kernel of the kernelspec ``kernel_name`` (``rlm``, ``python3``);
    ``kwargs`` go to :func:`jupyter_client.manager.start_new_kernel` (``env``,
    ``stderr``).  Returns (manager, client); :func:`stop` ends both."""
    return start_new_kernel(kernel_name=kernel_name, startup_timeout=60, **kwargs)


def stop(km, kc) -> None:
    """Close the client's channels and shut the kernel down at once."""
    kc.stop_channels()
    km.shutdown_kernel(now=True)


@contextmanager
def running(kernel_name: str = "rlm", **kwargs: Any) -> Iterator[tuple[Any, Any]]:
    """A kernel for the ``with`` block: (manager, client) from :func:`start`, stopped on
    leaving, whatever happened.  The ``kernel`` fixture of tests/conftest.py is this."""
    km, kc = start(kernel_name, **kwargs)
    try:
        yield km, kc
    finally:
        stop(km, kc)


def execute(kc, code: str, *, timeout: float = 600, cell_id: str | None = None,
            on_message=None) -> tuple[dict, list[dict]]:
    """Run one cell (with ``metadata.cellId``, as JupyterLab sends it); return its
    execute_reply and its IOPub messages up to idle, each also given to ``on_message``."""
    msg = kc.session.msg("execute_request", {
        "code": code, "silent": False, "store_history": True, "user_expressions": {},
        "allow_stdin": False, "stop_on_error": True}, metadata={"cellId": cell_id or ""})
    kc.shell_channel.send(msg)
    msg_id = msg["header"]["msg_id"]
    messages, deadline = [], time.monotonic() + timeout
    while True:
        try:
            m = kc.get_iopub_msg(timeout=max(0.5, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"cell not idle after {timeout} s") from None
        if m["parent_header"].get("msg_id") != msg_id:
            continue
        messages.append(m)
        if on_message is not None:
            on_message(m)
        if m["msg_type"] == "status" and m["content"]["execution_state"] == "idle":
            break
    while True:  # the reply to this request (not, say, a late kernel_info_reply)
        reply = kc.get_shell_msg(timeout=30)
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply, messages


def printed_json(kc, code: str, *, timeout: float = 60) -> Any:
    """Run ``code`` (a cell that prints one JSON document last) and return that
    document's value; the cell must succeed."""
    reply, messages = execute(kc, code, timeout=timeout)
    assert reply["content"]["status"] == "ok", text_of(messages)
    return json.loads(text_of(messages).strip().splitlines()[-1])


def text_of(messages: list[dict]) -> str:
    """Stream text and plain-text results of a cell's messages."""
    parts = []
    for m in messages:
        c = m["content"]
        if m["msg_type"] == "stream":
            parts.append(c["text"])
        elif m["msg_type"] in ("execute_result", "display_data"):
            parts.append(c["data"].get("text/plain", "") + "\n")
        elif m["msg_type"] == "error":
            parts.append(f"{c['ename']}: {c['evalue']}\n")
    return "".join(parts)


def script_model(kc, replies: list[str], **config) -> None:
    """Inside the kernel: every model the magic makes is a ScriptedModel with ``replies``
    (the loop's mechanics under test, not answers), with the settings of every scripted
    run (:data:`tests.scripted.SCRIPTED_SETTINGS`: no answer or grounding check, the run's
    own temperature throughout), then ``c.RLM.<key> = value`` for each of ``config``."""
    reply, _ = execute(kc, script_model_code(replies, **config))
    assert reply["content"]["status"] == "ok", reply["content"]


def script_model_code(replies: list[str], **config) -> str:
    """The cell :func:`script_model` runs (for a notebook that scripts its own model)."""
    lines = ["import rlm_kernel.engine.rlm as _e",
             "from rlm_kernel.models.scripted import ScriptedModel as _S",
             f"_lm = _S({replies!r})",
             "_e.make_client = lambda *a, **k: _lm"]
    lines += [f"get_ipython().run_line_magic('config', {f'RLM.{k} = {v!r}'!r})"
              for k, v in {**SCRIPTED_SETTINGS, **config}.items()]
    return "\n".join(lines)


def announce_frontend(kc) -> None:
    """Do what the JupyterLab extension does: open a comm to rlm_kernel.frontend."""
    msg = kc.session.msg("comm_open", {"comm_id": uuid.uuid4().hex,
                                       "target_name": "rlm_kernel.frontend",
                                       "data": {"version": 1}})
    kc.shell_channel.send(msg)
