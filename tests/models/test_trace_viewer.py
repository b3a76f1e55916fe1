"""A run's spans in a real trace viewer, as a user gets them (docs/tracing.md): Arize
Phoenix on 127.0.0.1 with its own data folder, telemetry and external resources (web
fonts) off; ``rlm run --callbacks otel`` in a subprocess with the standard
``OTEL_EXPORTER_OTLP_*`` variables, its model a priced one (``openai/gpt-4o-mini``)
answered by a local OpenAI-compatible server (bench/openai_stub.py), so USD is real.

The span tree is read back through Phoenix's own client (run -> steps -> calls, tokens
and USD on the calls) and its GraphQL API (the cost Phoenix computes and shows), then
the run is found in Phoenix's UI in Chromium, which fetches nothing from outside this
machine.  The screenshot goes to ``docs/images/trace-viewer.png`` with
``RLM_UPDATE_IMAGES=1`` (else a temporary folder)::

    RLM_UPDATE_IMAGES=1 .venv/bin/python -m pytest -q tests/models/test_trace_viewer.py
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from bench.openai_stub import fake_server
from tests.lab_harness import REPO_ROOT, ServerProcess, chromium_page, free_port, venv_bin
from tests.replies import block

pytestmark = [pytest.mark.slow,
              # ldap3 (imported with Phoenix's client) uses pyasn1's deprecated names
              pytest.mark.filterwarnings("ignore:(tagMap|typeMap) is deprecated")]

IMAGE = REPO_ROOT / "docs" / "images" / "trace-viewer.png"
PROJECT = "rlm-runs"  # Phoenix project, named by the x-project-name OTLP header
MODEL = "openai/gpt-4o-mini"
QUESTION = "Which word does the sub-model say?"
SUB_PROMPT = "Say one word: banana"
# Each reply's usage, as the server reports it: a step of a long context (about $0.02).
PROMPT_TOKENS, COMPLETION_TOKENS = 100_000, 5_000


class Phoenix(ServerProcess):
    """``phoenix serve`` on 127.0.0.1 (free HTTP and gRPC ports), its database in
    ``data_dir``, no telemetry, no web fonts or other outside resources."""

    name = "phoenix"
    prefix = "rlm-phoenix-"

    def __init__(self, data_dir: Path, start_timeout: float = 180.0) -> None:
        super().__init__(start_timeout)
        self.data_dir = data_dir
        self.grpc_port = free_port()

    def command(self) -> list[str]:
        """The viewer's command line (its settings are environment variables)."""
        return [venv_bin("phoenix"), "serve"]

    def ready(self) -> bool:
        """Whether its health check answers."""
        with urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as reply:
            return reply.status == 200

    def start(self) -> Phoenix:
        """Start the viewer and wait until it answers."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PHOENIX_WORKING_DIR": str(self.data_dir),
               "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(self.port),
               "PHOENIX_GRPC_PORT": str(self.grpc_port),
               "PHOENIX_TELEMETRY_ENABLED": "false",
               "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false"}
        self._launch(self.data_dir, env)
        return self

    def graphql(self, query: str) -> dict[str, Any]:
        """The ``data`` of a GraphQL query to the viewer (the API its UI reads)."""
        request = urllib.request.Request(f"{self.url}/graphql",
                                         data=json.dumps({"query": query}).encode(),
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as reply:
            body = json.load(reply)
        assert not body.get("errors"), body["errors"]
        return body["data"]


def _replies(n: int, body: dict[str, Any]) -> str:
    """The fake model: a sub-call's prompt is answered "banana"; the root model asks
    the sub-model in step 1 and answers with its reply in step 2."""
    if body["messages"][-1]["content"] == SUB_PROMPT:
        return "banana"
    if n == 1:
        return block(f"word = llm_query({SUB_PROMPT!r})\nprint(word)")
    return block("FINAL(word)")


@pytest.fixture()
def out_dir(tmp_path: Path) -> Path:
    """``docs/images/`` with ``RLM_UPDATE_IMAGES=1``, else a temporary folder."""
    if os.environ.get("RLM_UPDATE_IMAGES") == "1":
        IMAGE.parent.mkdir(parents=True, exist_ok=True)
        return IMAGE.parent
    return tmp_path


def test_a_run_s_spans_arrive_in_phoenix_and_its_ui_shows_the_run(tmp_path, out_dir):
    from phoenix.client import Client

    with Phoenix(tmp_path / "phoenix") as viewer, \
            fake_server(_replies, PROMPT_TOKENS, COMPLETION_TOKENS) as model:
        env = {**os.environ, "OPENAI_API_BASE": model.api_base, "OPENAI_API_KEY": "sk-test",
               "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "OTEL_EXPORTER_OTLP_ENDPOINT": viewer.url,
               "OTEL_EXPORTER_OTLP_HEADERS": f"x-project-name={PROJECT}",
               "OTEL_SERVICE_NAME": "rlm-test"}
        env.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
        (tmp_path / "notes.txt").write_text("A note.\n")
        proc = subprocess.run(
            [venv_bin("rlm"), "run", "--model", MODEL, "--callbacks", "otel",
             "--no-verify-answer", "--context", str(tmp_path / "notes.txt"), "--json",
             QUESTION], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        result = json.loads(proc.stdout)
        assert result["answer"] == "banana" and result["cost_usd"] > 0, result
        # The process has exited: its spans were delivered before it did.
        spans = Client(base_url=viewer.url).spans.get_spans(project_identifier=PROJECT,
                                                            limit=100)
        _check_span_tree(spans, result)
        cost = viewer.graphql('{ projects { edges { node { name costSummary { total '
                              '{ cost } } } } } }')
        [project] = [e["node"] for e in cost["projects"]["edges"]
                     if e["node"]["name"] == PROJECT]
        # Phoenix prices the calls itself from the GenAI attributes: as litellm did.
        assert project["costSummary"]["total"]["cost"] == pytest.approx(result["cost_usd"])
        _find_the_run_in_the_ui(viewer, tmp_path, out_dir)


def _check_span_tree(spans: list[dict[str, Any]], result: dict[str, Any]) -> None:
    """One run span, its two step spans and three call spans, nested as they happened,
    with Phoenix's span kinds, the calls' tokens and USD."""
    assert len(spans) == 6, [s["name"] for s in spans]
    by_id = {s["context"]["span_id"]: s for s in spans}
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    [run] = [s for s in spans if s["parent_id"] is None]
    assert (run["name"], run["span_kind"]) == ("invoke_agent rlm", "AGENT")
    assert run["attributes"]["rlm.question"] == QUESTION
    steps = sorted((s for s in spans if s["span_kind"] == "TOOL"),
                   key=lambda s: s["attributes"]["rlm.step"])
    assert [s["name"] for s in steps] == ["execute_tool repl"] * 2
    assert all(by_id[s["parent_id"]] is run for s in steps)
    calls = [s for s in spans if s["span_kind"] == "LLM"]
    assert len(calls) == 3 and {c["name"] for c in calls} == {f"chat {MODEL}"}
    [sub] = [c for c in calls if c["attributes"]["rlm.role"] == "sub"]
    assert by_id[sub["parent_id"]] is steps[0]  # made by step 1's code
    assert all(by_id[c["parent_id"]] is run for c in calls if c is not sub)  # root turns
    for call in calls:
        attrs = call["attributes"]
        assert attrs["llm.token_count.prompt"] == PROMPT_TOKENS  # Phoenix's, from gen_ai.*
        assert attrs["llm.token_count.completion"] == COMPLETION_TOKENS
        assert attrs["llm.provider"] == "openai"
        assert attrs["rlm.cost_usd"] > 0
    assert sum(c["attributes"]["rlm.cost_usd"] for c in calls) == \
        pytest.approx(result["cost_usd"])


def _find_the_run_in_the_ui(viewer: Phoenix, tmp_path: Path, out_dir: Path) -> None:
    """Open the project, then the run's trace: its steps and calls are listed."""
    hosts: set[str] = set()
    with chromium_page(tmp_path / "chromium", timeout_ms=60_000) as page:
        page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
        page.goto(f"{viewer.url}/projects")
        page.get_by_text(PROJECT, exact=True).first.click()
        page.get_by_text("invoke_agent rlm").first.click()
        for text in ("execute_tool repl", f"chat {MODEL}"):
            page.get_by_text(text).first.wait_for()
        page.wait_for_timeout(1500)  # the details pane settles
        page.screenshot(path=str(out_dir / IMAGE.name))
    assert hosts == {f"127.0.0.1:{viewer.port}"}, hosts  # nothing from outside
