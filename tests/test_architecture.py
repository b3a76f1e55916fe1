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


def test_old_import_paths_still_work():
    from rlm_kernel.llm import LLMError, make_client
    from rlm_kernel.models import LLMError as moved_error
    from rlm_kernel.models import make_client as moved_factory
    from rlm_kernel.models.scripted import ScriptedModel as moved_model
    from rlm_kernel.testing import ScriptedModel

    assert LLMError is moved_error and make_client is moved_factory
    assert ScriptedModel is moved_model
