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
