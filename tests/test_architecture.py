"""The layer rules: import-linter's contracts (pyproject.toml) and what importing the
engine loads at run time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUPYTER_AND_PROVIDERS = ("IPython", "ipykernel", "ipywidgets", "traitlets", "nbformat",
                         "jupyter_client", "zmq", "litellm", "openai")


def test_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    proc = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


def test_importing_the_engine_loads_no_jupyter_and_no_provider_sdk():
    code = ("import json, sys\nimport rlm_kernel.engine\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    assert not loaded & set(JUPYTER_AND_PROVIDERS), sorted(loaded & set(JUPYTER_AND_PROVIDERS))


def test_the_kernel_extension_loads_no_nbformat_at_start():
    """The RLM kernel loads the extension when it starts: nbformat (a second of
    jsonschema) waits for the first export, or jupyter_client's readiness check
    times out and queues extra kernel_info replies."""
    code = ("import json, sys\nimport rlm_kernel.jupyter.extension\n"
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    assert not loaded & {"nbformat", "jsonschema", "litellm"}, sorted(loaded)


def test_importing_the_engine_runs_the_loop_with_a_scripted_model_and_still_no_jupyter():
    """A whole run (scripted replies, plain executor) loads no Jupyter module either."""
    code = ("import json, sys\nfrom rlm_kernel.engine import RLM\n"
            "from rlm_kernel.models.scripted import ScriptedModel\n"
            "lm = ScriptedModel(['```repl\\nFINAL(len(context))\\n```'])\n"
            "r = RLM(root_client=lm, sub_client=lm, verify_answer=False).run('How long?', context='abc')\n"
            "print(json.dumps([r.answer, sorted({m.split('.')[0] for m in sys.modules})]))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    answer, loaded = json.loads(proc.stdout)
    assert answer == "3"
    assert not set(loaded) & set(JUPYTER_AND_PROVIDERS), sorted(set(loaded) & set(JUPYTER_AND_PROVIDERS))


def test_the_package_names_users_import_are_the_engines():
    from rlm_kernel import RLM, RLMConfig, RLMResult
    from rlm_kernel.engine import RLM as engine_rlm
    from rlm_kernel.engine.config import RLMConfig as config
    from rlm_kernel.engine.result import RLMResult as result

    assert (RLM, RLMConfig, RLMResult) == (engine_rlm, config, result)


def test_the_wheel_ships_only_the_package_with_its_kernelspec_and_type_marker():
    """``py.typed`` is there, the kernelspec lives in the package, the evals do not."""
    package = ROOT / "rlm_kernel"
    assert (package / "py.typed").is_file()
    assert (package / "jupyter" / "resources" / "kernel.json").is_file()
    assert not (package / "evals.py").exists() and (ROOT / "evals" / "questions.py").is_file()


def _import_graph() -> dict[str, set[str]]:
    """The package's modules and the package modules each imports at run time (grimp,
    which import-linter uses; imports under ``if TYPE_CHECKING:`` left out)."""
    import grimp

    graph = grimp.build_graph("rlm_kernel", cache_dir=None, exclude_type_checking_imports=True)
    return {m: {i for i in graph.find_modules_directly_imported_by(m)
                if i == "rlm_kernel" or i.startswith("rlm_kernel.")}
            for m in graph.modules if m == "rlm_kernel" or m.startswith("rlm_kernel.")}


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, or of one that
    imports itself (Tarjan 1972, "Depth-first search and linear graph algorithms",
    iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))
    return found


def test_the_cycle_finder_finds_a_cycle_and_passes_a_tree():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"a"}}) == [["a"]]
    assert _cycles({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []


def test_the_package_has_no_import_cycle():
    edges = _import_graph()
    assert "rlm_kernel.engine.rlm" in edges  # the graph is the package's
    assert _cycles(edges) == []


def test_the_reserved_names_sit_at_the_bottom_of_the_engine():
    """engine.names imports nothing of the package, and no lower layer imports the
    package root (its ``__version__`` comes from rlm_kernel._version)."""
    edges = _import_graph()
    assert edges["rlm_kernel.engine.names"] == set()
    assert edges["rlm_kernel._version"] == set()
    assert [m for m, imported in edges.items() if "rlm_kernel" in imported] == []


def test_the_engine_exports_the_users_api_and_front_ends_have_one_module():
    import rlm_kernel.engine as engine
    from rlm_kernel.engine import frontends

    assert len(engine.__all__) <= 15
    assert {"RLM", "RLMConfig", "RLMResult"} <= set(engine.__all__)
    assert all(hasattr(engine, name) for name in engine.__all__)
    assert all(hasattr(frontends, name) for name in frontends.__all__)
    assert not set(engine.__all__) & set(frontends.__all__)
