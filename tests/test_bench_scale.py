"""``bench/bench_scale.py`` in its quick mode: Dask workers, Router deployments and
``rlm batch`` measured against the stub model server (its own process), the one table
printed.  The figures are the bench's to report; this checks the table's shape."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parents[1] / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_the_quick_bench_prints_one_table_of_every_measure(capsys):
    bench = _load("bench_scale")
    rows = bench.main(["--quick"])
    out = capsys.readouterr().out
    header = out.splitlines()[2]
    for column in ("measure", "setting", "figure", "ratio vs baseline", "target", "met?"):
        assert column in header
    assert [(r.measure.split(",")[0], r.setting.split(" (")[0].split(",")[0]) for r in rows] == [
        ("tasks/min", "1 worker"), ("tasks/min", "2 workers"), ("tasks/min", "4 workers"),
        ("llm_query_batched(16)", "1 deployment x 1 slot"),
        ("llm_query_batched(16)", "2 deployments x 1 slot"),
        ("llm_query_batched(16)", "2 deployments x 1 slot"),
        ("s per task", "plain loop of RLM().run()"),
        ("s per task", "rlm batch --cluster local:1"),
    ]
    for row in rows:
        assert row.figure > 0
        assert row.setting in out
    baselines = [r for r in rows if "baseline" in r.setting]
    assert len(baselines) == 3 and all(r.met is None for r in baselines)
    assert all(isinstance(r.met, bool) for r in rows if r not in baselines)


def test_the_stub_answers_root_steps_and_sub_calls_after_its_latency_one_slot_at_a_time():
    """Two concurrent requests on a one-slot stub: the second waits for the first."""
    import json
    import time
    import urllib.request
    from concurrent.futures import ThreadPoolExecutor

    stub_server = _load("stub_server")

    def ask(base: str, content: str) -> tuple[str, float]:
        body = json.dumps({"model": "stub", "messages": [
            {"role": "system", "content": "s"}, {"role": "user", "content": content}]})
        req = urllib.request.Request(base + "/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
        start = time.perf_counter()
        with urllib.request.urlopen(req, timeout=10) as resp:
            reply = json.load(resp)
        return reply["choices"][0]["message"]["content"], time.perf_counter() - start

    with stub_server.StubDeployment(latency=0.3, slots=1) as stub:
        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(lambda c: ask(stub.base_url, c),
                                 ["How many words? [batched:4:abc]", "SUB: a line"]))
        stats = stub.stats()
    (root_text, root_s), (sub_text, sub_s) = done
    assert "llm_query_batched" in root_text and "of abc" in root_text
    assert "FINAL(" in root_text
    assert sub_text.startswith("ok (a line")
    assert max(root_s, sub_s) >= 0.6  # the second request queued behind the first
    assert stats["requests"] == 2 and stats["root"] == 1 and stats["sub"] == 1
    assert stats["peak"] == 1  # never two in the one slot
    assert stub.proc is None  # the stub's process was stopped
