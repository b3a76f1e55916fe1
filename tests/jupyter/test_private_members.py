"""The private members of ipykernel and IPython that rlm_kernel reads or overrides,
named one by one: a release that drops or renames one fails here (pyproject.toml bounds
both packages below their next major version for this reason)."""

from __future__ import annotations

import inspect

import pytest
from ipykernel.kernelbase import Kernel
from ipykernel.zmqshell import ZMQInteractiveShell
from IPython.core.interactiveshell import InteractiveShell
from IPython.testing.globalipapp import start_ipython

# (owner, member, the parameters it is called or overridden with, who uses it)
METHODS = [
    (Kernel, "_publish_status", ["status", "channel", "parent"],
     "RLMKernel overrides it: no status for other channels during a run"),
    (ZMQInteractiveShell, "_showtraceback", ["etype", "evalue", "stb"],
     "RLMShell overrides it; the stock shell's step swaps it"),
    (InteractiveShell, "_showtraceback", ["etype", "evalue", "stb"],
     "the stock (terminal) shell's step swaps it"),
    (InteractiveShell, "_get_exc_info", ["exc_tuple"],
     "RLMShell overrides it; the stock shell's step swaps it"),
]


@pytest.mark.parametrize("owner,name,params,user", METHODS,
                         ids=[f"{o.__name__}.{n}" for o, n, _, _ in METHODS])
def test_a_private_method_used_exists_with_its_parameters(owner, name, params, user):
    method = getattr(owner, name, None)
    assert callable(method), f"{owner.__name__}.{name} is gone ({user})"
    assert list(inspect.signature(method).parameters)[1:] == params, user


def test_the_builtin_trap_and_compiler_members_used_exist():
    """``bind_session_functions`` reads the builtin trap's ``_nested_level`` and
    ``_orig_builtins`` (binding a helper mid-cell); the isolated steps read the
    compiler's ``_filename_map`` (a step's ``Cell In[n]``)."""
    start_ipython()
    shell = InteractiveShell.instance()
    trap = shell.builtin_trap
    assert isinstance(trap._nested_level, int)
    assert isinstance(trap._orig_builtins, dict)
    assert isinstance(shell.compile._filename_map, dict)
