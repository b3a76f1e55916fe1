"""A model server that dies mid-request is reported as such, not as a refused
connection: the error names the signal and quotes the server's log.

The server here is a small HTTP process standing in for llama.cpp's: it answers the
readiness probe, then kills itself with SIGSEGV on the first completion request, as
a llama.cpp build with CPU kernels the machine cannot run does."""

from __future__ import annotations

import sys
import textwrap

import pytest

from rlm_kernel.models import LLMError
from rlm_kernel.models.local import server

CRASHING_SERVER = textwrap.dedent("""
    import http.server, os, signal, sys

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b'{"object": "list", "data": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            print("ggml_backend_cpu: about to crash", flush=True)
            os.kill(os.getpid(), signal.SIGSEGV)

    print("fake server listening", flush=True)
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
""")


@pytest.fixture
def crashing_server(tmp_path, monkeypatch):
    script = tmp_path / "crashing_server.py"
    script.write_text(CRASHING_SERVER)
    monkeypatch.setenv("RLM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(server, "prepare", lambda name: tmp_path / "weights.gguf")
    monkeypatch.setattr(server, "server_command",
                        lambda path, name, port, settings: [sys.executable, str(script),
                                                            str(port)])
    monkeypatch.setattr(server, "with_parent_death", lambda cmd: cmd)
    monkeypatch.setattr(server, "_servers", {})
    yield
    server.stop_server()


def test_a_server_killed_by_a_signal_is_named_with_its_log(crashing_server):
    client = server.LocalModelClient(server.get_spec(None).name, timeout=30)
    with pytest.raises(LLMError) as info:
        client.complete([{"role": "user", "content": "hello there"}])
    message = str(info.value)
    assert "died while answering (killed by SIGSEGV)" in message
    assert "about to crash" in message  # the log's last lines
    assert "connection refused" not in message


def test_a_running_server_has_no_end_to_report(crashing_server):
    server.ensure_server()
    assert server.how_it_ended() is None
