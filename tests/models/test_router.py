"""Model fleets (``c.RLM.router``): real runs through litellm's Router over two local
OpenAI-compatible servers (bench/openai_stub.py: real HTTP, real litellm)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bench.openai_stub import fake_server
from rlm_kernel import RLM
from rlm_kernel.models import LLMError, make_client
from rlm_kernel.models.router import RouterClient, fleet_yaml, get_router, load_fleet
from tests.replies import block

ROOT = Path(__file__).resolve().parents[2]
BATCH = block("answers = llm_query_batched([f'q{i}' for i in range(16)])\n"
              "FINAL(' '.join(a.split(':')[0] for a in answers))")


def _last_user(body: dict) -> str:
    return str(body["messages"][-1]["content"])


def server_reply(name: str, root_reply: str = BATCH):
    """A server's reply: the root model's turn (the RLM system prompt is first) is
    ``root_reply``; a sub-call is ``<name>:<prompt's last word>``."""

    def reply(n: int, body: dict) -> str:
        if "```repl" in str(body["messages"][0]["content"]):  # the root model's system prompt
            return root_reply
        return f"{name}:{_last_user(body).split()[-1]}"

    return reply


def fleet(*bases: str, ids: bool = True, **settings) -> dict:
    """A fleet dict of one model_name, ``fleet``, one deployment per URL."""
    deps = []
    for n, base in enumerate(bases, 1):
        dep = {"model_name": "fleet",
               "litellm_params": {"model": "openai/m", "api_base": base, "api_key": "k"}}
        if ids:
            dep["model_info"] = {"id": f"server-{n}"}
        deps.append(dep)
    return {"model_list": deps, "router_settings": {"num_retries": 2, **settings}}


def test_a_batch_of_16_sub_calls_reaches_both_servers():
    """16 sub-calls spread over both servers; run again, the sub-call cache answers them
    through the same Router (no request reaches a server but the root step's)."""
    from rlm_kernel.models import configure_cache

    configure_cache(None)  # a fresh memory cache below: no reply of another test
    with fake_server(server_reply("A"), delay=0.05) as a, \
            fake_server(server_reply("B"), delay=0.05) as b:
        rlm = RLM(model="fleet", sub_model="fleet", router=fleet(a.api_base, b.api_base),
                  executor="in-process", max_iterations=2, cache="memory")
        result = rlm.run("Ask 16 questions.")
        assert result.stopped_by == "final", result.error
        labels = result.answer.split()
        assert len(labels) == 16 and set(labels) == {"A", "B"}
        assert len(a.seen) + len(b.seen) == 17  # the root step and 16 sub-calls
        subs = [c for c in result.calls if c.role == "sub"]
        assert len(subs) == 16
        assert {c.deployment for c in subs} == {"server-1", "server-2"}
        assert sum(c.deployment == "server-1" for c in subs) == labels.count("A")
        assert all(c.model == "fleet" and c.error is None for c in result.calls)
        again = rlm.run("Ask 16 questions.")
        assert again.answer == result.answer
        assert [c.cached for c in again.calls if c.role == "sub"] == [True] * 16
        assert len(a.seen) + len(b.seen) == 18


def test_a_server_killed_mid_run_the_survivor_answers():
    """Server A is shut down by the first sub-call it answers; the run still answers,
    and every call after that names server B."""
    killed = threading.Event()
    holder: dict = {}

    program = block("first = [llm_query(f'p{i}') for i in range(4)]\n"
                    "rest = llm_query_batched([f'q{i}' for i in range(8)])\n"
                    "FINAL(' '.join(a.split(':')[0] for a in first + rest))")

    def reply_a(n: int, body: dict) -> str:
        text = server_reply("A", program)(n, body)
        if text.startswith("A:") and not killed.is_set():
            killed.set()
            threading.Thread(target=holder["a"].shutdown).start()
        return text

    with fake_server(reply_a) as a, fake_server(server_reply("B", program)) as b:
        holder["a"] = a
        settings = {"routing_strategy": "simple-shuffle", "cooldown_time": 60,
                    "allowed_fails": 0}
        fleet_ = fleet(a.api_base, b.api_base, **settings)
        fleet_["model_list"][0]["litellm_params"]["rpm"] = 1000  # A is picked first:
        fleet_["model_list"][1]["litellm_params"]["rpm"] = 1  # weights by rpm
        result = RLM(model="fleet", router=fleet_, executor="in-process", cache=None,
                     max_iterations=2).run("Ask 12 questions.")
        assert killed.wait(5), "server A answered no sub-call"
        assert result.stopped_by == "final", result.error
        subs = [c for c in result.calls if c.role == "sub"]
        assert len(subs) == 12 and all(c.error is None for c in subs)
        first_b = next(i for i, c in enumerate(subs) if c.deployment == "server-2")
        assert all(c.deployment == "server-2" for c in subs[first_b:])
        assert result.answer.split().count("A") == first_b  # A answered before it died
        assert len(a.seen) == 1 + first_b  # the root step and those, nothing after


def test_deployment_names_without_ids_and_span_attribute():
    from rlm_kernel.models import UsageLedger, tracing

    with fake_server(lambda n: "hi") as a:
        client = make_client("fleet", router=fleet(a.api_base, ids=False))
        assert isinstance(client, RouterClient)
        client.ledger = UsageLedger()
        call = client.complete([{"role": "user", "content": "x"}]).call
        assert call.deployment == f"openai/m@{a.api_base}"
        assert tracing.call_attributes(call)["rlm.deployment"] == call.deployment
        assert call.to_dict()["deployment"] == call.deployment
        assert call.prompt_tokens == 5 and call.completion_tokens == 2


def test_one_router_per_fleet_shared_by_every_client(tmp_path):
    spec = fleet("http://127.0.0.1:9/v1", "http://127.0.0.1:10/v1")
    path = tmp_path / "fleet.yaml"
    import yaml

    path.write_text(yaml.safe_dump(spec))
    root = make_client("fleet", router=str(path))
    sub = make_client("fleet", router=spec, max_tokens=5)
    assert get_router(root.fleet) is get_router(sub.fleet)  # the file and the dict
    assert make_client("openai/gpt-4o-mini", router=spec).__class__.__name__ == "LiteLLMClient"


def test_unknown_model_missing_file_bad_yaml_give_one_line(tmp_path):
    spec = fleet("http://127.0.0.1:9/v1")
    with pytest.raises(LLMError, match=r"has no model_name 'flet'; its model_names: fleet"):
        make_client("flet", router=spec)
    with pytest.raises(LLMError, match=r"router: no fleet file '.*nope.yaml'"):
        load_fleet(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model_list:\n  - model_name: x\n   litellm_params: [\n")
    with pytest.raises(LLMError, match=r"bad.yaml is not valid YAML \(line \d+\)"):
        load_fleet(bad)
    bad.write_text("model_list:\n  - model_name: x\n")
    with pytest.raises(LLMError, match=r"deployment 1 \(x\) needs litellm_params"):
        load_fleet(bad)
    bad.write_text("- just a list\n")
    with pytest.raises(LLMError, match="must hold a mapping with a model_list"):
        load_fleet(bad)
    env = {"model_list": [{"model_name": "x", "litellm_params": {
        "model": "openai/m", "api_key": "os.environ/RLM_TEST_UNSET_KEY"}}]}
    with pytest.raises(LLMError, match="RLM_TEST_UNSET_KEY from the environment, which is"):
        load_fleet(env)
    with pytest.raises(LLMError, match="has no model_name 'flet'"):  # before the run
        RLM(model="flet", router=spec, executor="in-process").run("q")


def test_the_command_line_error_and_trajectory(tmp_path):
    with fake_server(server_reply("A", block("FINAL(llm_query('one more'))"))) as a, \
            fake_server(server_reply("B", block("FINAL(llm_query('one more'))"))) as b:
        path = tmp_path / "fleet.yaml"
        path.write_text(fleet_yaml("fleet", [a.api_base, b.api_base], model="openai/m"))
        cmd = [sys.executable, "-m", "rlm_kernel.cli", "run", "--router", str(path),
               "--model", "fleet", "--executor", "in-process", "--json", "--trajectory",
               "Say something."]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert data["stopped_by"] == "final" and re.fullmatch(r"[AB]:more", data["answer"])
        assert {c["deployment"] for c in data["calls"]} <= {"fleet-1", "fleet-2"}
        assert all(c["deployment"] for c in data["calls"]) and len(data["calls"]) == 2
        bad = subprocess.run([*cmd[:6], "--model", "flet", *cmd[8:]], capture_output=True,
                             text=True, timeout=120, cwd=ROOT)
        assert bad.returncode != 0
        assert "has no model_name 'flet'; its model_names: fleet" in bad.stderr
        assert "Traceback" not in bad.stderr


def test_max_llm_calls_holds_through_the_router():
    with fake_server(server_reply("A")) as a, fake_server(server_reply("B")) as b:
        result = RLM(model="fleet", router=fleet(a.api_base, b.api_base),
                     executor="in-process", max_iterations=2, cache=None,
                     max_llm_calls=6).run("Ask 16 questions.")
        assert result.stopped_by == "budget", (result.stopped_by, result.error)
        assert len(result.calls) <= 6
        assert len(a.seen) + len(b.seen) == len(result.calls)


def test_a_notebook_task_and_llm_query_outside_runs_use_the_fleet(kc, tmp_path):
    """In a real rlm kernel: ``%config RLM.router``, a ``%%rlm --model fleet`` task whose
    16 sub-calls reach both servers, and ``llm_query`` in a plain cell after it."""
    import yaml

    from tests.kernel_client import execute, printed_json, text_of

    with fake_server(server_reply("A")) as a, fake_server(server_reply("B")) as b:
        path = tmp_path / "fleet.yaml"
        path.write_text(yaml.safe_dump(fleet(a.api_base, b.api_base)))
        reply, messages = execute(kc, f"%config RLM.router = {str(path)!r}\n"
                                      "%config RLM.sub_model = 'fleet'\n"
                                      "%config RLM.cache = None", timeout=60)
        assert reply["content"]["status"] == "ok", text_of(messages)
        reply, messages = execute(kc, "%%rlm --model fleet --max-iterations 2\n"
                                      "Ask 16 questions.", timeout=300)
        assert reply["content"]["status"] == "ok", text_of(messages)
        report = printed_json(kc, (
            "import json\n"
            "_r = list(get_ipython().magics_manager.registry['RLMMagics'].runs.values())"
            "[-1].result\n"
            "print(json.dumps({'answer': _r.answer, 'stopped_by': _r.stopped_by, "
            "'deployments': [c.deployment for c in _r.calls], "
            "'outside': llm_query('one more')}))"))
        assert report["stopped_by"] == "final"
        assert set(report["answer"].split()) == {"A", "B"}
        assert set(report["deployments"]) == {"server-1", "server-2"}
        assert re.fullmatch(r"[AB]:more", report["outside"])
        assert len(a.seen) + len(b.seen) == 18


def test_children_and_candidates_go_through_the_router():
    """A child run (``rlm_query``) and a second candidate, with their sampling seeds,
    send every call through the fleet: each record names a deployment."""
    child = block("FINAL(llm_query('from the child'))")
    parent = block("FINAL(rlm_query('go deeper'))")

    def reply(n: int, body: dict) -> str:
        first = str(body["messages"][0]["content"])
        if "```repl" not in first:
            return f"S:{_last_user(body).split()[-1]}"
        return child if "go deeper" in json.dumps(body["messages"][1:]) else parent

    with fake_server(reply) as a, fake_server(reply) as b:
        result = RLM(model="fleet", router=fleet(a.api_base, b.api_base), cache=None,
                     executor="in-process", max_iterations=2, max_depth=1, candidates=2,
                     candidates_early_stop=False).run("Delegate.")
        assert result.stopped_by == "final", result.error
        assert result.answer == "S:child"
        assert [c.role for c in result.calls].count("sub") == 2
        assert len(result.calls) == 6  # per candidate: root, child root, child sub-call
        assert all(c.deployment in ("server-1", "server-2") for c in result.calls)
        assert len(a.seen) + len(b.seen) == 6  # cache off: nothing answered from it
        assert not any(c.cached for c in result.calls)
        from rlm_kernel.models import import_litellm

        assert import_litellm().cache is None  # building the Router installed none
