"""The engine's old module paths still import (code written before the engine was
grouped by concept, e.g. ``import rlm_kernel.engine.loop``), as the very module that
now holds the code, with a DeprecationWarning naming the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from rlm_kernel.engine.moved_modules import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_is_the_new_module_with_a_warning(old):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=MOVED[old].replace(".", r"\.")):
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module.__spec__.name == MOVED[old]  # the module keeps its own spec


def test_a_patch_through_the_old_path_acts_on_the_engine():
    code = ("import warnings; warnings.simplefilter('ignore')\n"
            "import rlm_kernel.engine.loop as old\n"
            "from rlm_kernel.models.scripted import ScriptedModel\n"
            "from tests.replies import block\n"
            "lm = ScriptedModel([block('FINAL(len(context))')])\n"
            "old.make_client = lambda *a, **k: lm\n"
            "from rlm_kernel.engine import RLM\n"
            "res = RLM(model='openai/x', ground_answer=False).run('n?', context='abcd')\n"
            "print(res.answer)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "4"


def test_an_unknown_engine_module_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("rlm_kernel.engine.no_such_module")



def test_session_tools_is_gone():
    import rlm_kernel.engine as engine
    from rlm_kernel.engine import repl_functions

    for owner in (engine, repl_functions):
        assert not hasattr(owner, "session_tools")
