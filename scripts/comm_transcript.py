"""Print the comm messages of one real run in the `rlm` kernel, as a frontend sees them.

Starts the kernel with jupyter_client, announces a frontend (as the JupyterLab
extension does), loads the interpreter's `json` package, asks a prose question,
and prints every message of the `rlm_kernel.run` comm, one line each.
Run: ``.venv/bin/python scripts/comm_transcript.py``.
"""

from __future__ import annotations

import argparse
import json
import random
import uuid

from jupyter_client.manager import start_new_kernel

from evals.questions import defines_function_question, stdlib_dir


def short(value: object, limit: int = 90) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def main() -> None:
    km, kc = start_new_kernel(kernel_name="rlm", startup_timeout=60)
    try:
        kc.execute_interactive(
            "from rlm_kernel.context.files import load_folder\n"
            f"context = {{k: v for k, v in load_folder({str(stdlib_dir() / 'json')!r}).items()"
            " if k.endswith('.py')}", timeout=60)
        kc.shell_channel.send(kc.session.msg("comm_open", {
            "comm_id": uuid.uuid4().hex, "target_name": "rlm_kernel.frontend",
            "data": {"version": 1}}))
        question = defines_function_question("json", random.Random(0)).text

        widgets = []

        def hook(msg: dict) -> None:
            kind = msg["msg_type"]
            if kind == "comm_open" and msg["content"].get("target_name") == "jupyter.widget":
                widgets.append(1)
                return
            if kind == "status":
                print(f"status     {msg['content']['execution_state']}")
            elif kind in ("comm_open", "comm_msg", "comm_close"):
                data = msg["content"].get("data") or {}
                if "type" in data or kind == "comm_close":
                    fields = {k: v for k, v in data.items()
                              if k not in ("type", "run_id", "cell_id") or data["type"] ==
                              "run_started"}
                    print(f"{kind:<10} {data.get('type', '')} {short(fields, 150)}")
            elif kind == "execute_result":
                print(f"result     {short(msg['content']['data'].get('text/plain'))}")

        req = kc.session.msg("execute_request", {
            "code": question, "silent": False, "store_history": True, "user_expressions": {},
            "allow_stdin": False}, metadata={"cellId": "task-cell-1"})
        kc.shell_channel.send(req)
        while True:
            msg = kc.get_iopub_msg(timeout=600)
            if msg["parent_header"].get("msg_id") != req["header"]["msg_id"]:
                continue
            hook(msg)
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        print(f"({len(widgets)} jupyter.widget comms opened for the progress/variables views)")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    main()
