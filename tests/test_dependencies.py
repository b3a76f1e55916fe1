"""The dependencies pyproject.toml admits: never a release known to be compromised, and
never the next major version of a library whose private members rlm_kernel uses."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]

COMPROMISED = {
    # a credential stealer in a .pth file run at every Python start (BerriAI/litellm#24512)
    "litellm": ["1.82.7", "1.82.8", "1.107.0"],
}


def test_no_compromised_release_is_admitted():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = [Requirement(r) for r in project["dependencies"]]
    requirements += [Requirement(r) for extra in project["optional-dependencies"].values()
                     for r in extra]
    for name, versions in COMPROMISED.items():
        found = [r for r in requirements if r.name == name]
        assert found, f"{name} is not a dependency any more: update this test"
        for requirement in found:
            admitted = [v for v in versions if requirement.specifier.contains(v)]
            assert not admitted, f"{requirement} admits {admitted}"


# The private members of third-party libraries that rlm_kernel reads or overrides
# (``obj._x``, ``getattr(obj, "_x")``, ``super()._x``), each with the distribution
# that defines it: pyproject.toml caps that distribution below its next major version,
# so a release that may drop the member is never installed unnoticed.  Whether each
# member still exists: tests/jupyter/test_private_members.py (ipykernel, IPython) and
# test_litellm_private_member_exists below.
PRIVATE_MEMBERS = {
    "_hidden_params": "litellm",  # ModelResponse._hidden_params["cache_hit"]
    "_publish_status": "ipykernel",  # Kernel._publish_status, overridden by RLMKernel
    "_showtraceback": "ipython",  # InteractiveShell._showtraceback, overridden
    "_get_exc_info": "ipython",  # InteractiveShell._get_exc_info, overridden
    "_nested_level": "ipython",  # BuiltinTrap._nested_level
    "_orig_builtins": "ipython",  # BuiltinTrap._orig_builtins
    "_filename_map": "ipython",  # CachingCompiler._filename_map
}
# The interpreter's own private members (os._exit, sys._getframe, asyncio's event loop
# and collections.abc's views ...): Python's version, not a dependency's, decides these;
# the tests run them on the Python of the venv.
STDLIB_MEMBERS = {
    "_exit", "_getframe", "_current_frames", "_filters_mutated", "_ncallbacks",
    "_ready", "_scheduled", "_stopping", "_callback", "_mapping",
}


def foreign_private_members() -> dict[str, set[str]]:
    """Private names (``_x``, not dunder) that rlm_kernel reads on some object or
    through ``getattr``/``hasattr``, minus the names it defines itself (functions,
    classes, attributes it assigns, variables, parameters), plus every ``super()._x``:
    {name: the files using it}.  A foreign member that rlm_kernel only assigns, never
    reads, is not found (none is today: ``loop._stopping`` is read too)."""
    defined: set[str] = set()
    used: dict[str, set[str]] = {}
    overridden: set[str] = set()
    private = re.compile(r"_[a-z][A-Za-z0-9_]*\Z")
    for path in sorted((ROOT / "rlm_kernel").rglob("*.py")):
        where = str(path.relative_to(ROOT))
        for node in ast.walk(ast.parse(path.read_text(), filename=where)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.arg):
                defined.add(node.arg)
            elif isinstance(node, ast.Attribute):
                owner = node.value
                if isinstance(node.ctx, ast.Store):  # an attribute rlm_kernel sets
                    defined.add(node.attr)
                elif private.match(node.attr):
                    used.setdefault(node.attr, set()).add(where)
                    if (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name)
                            and owner.func.id == "super"):
                        overridden.add(node.attr)
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("getattr", "hasattr", "setattr")
                  and len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
                  and isinstance(node.args[1].value, str)
                  and private.match(node.args[1].value)):
                used.setdefault(node.args[1].value, set()).add(where)
    return {name: files for name, files in used.items()
            if name not in defined or name in overridden}


def test_every_foreign_private_member_used_is_listed():
    found = foreign_private_members()
    unlisted = {name: sorted(files) for name, files in found.items()
                if name not in PRIVATE_MEMBERS and name not in STDLIB_MEMBERS}
    assert not unlisted, (
        f"private members of other packages used but not listed: {unlisted}; add each to "
        "PRIVATE_MEMBERS with its distribution and cap that one in pyproject.toml")
    gone = sorted(set(PRIVATE_MEMBERS) - set(found))
    assert not gone, f"listed but no longer used by rlm_kernel: {gone}"


@pytest.mark.parametrize("distribution", sorted(set(PRIVATE_MEMBERS.values())))
def test_a_distribution_whose_private_members_are_used_is_capped(distribution):
    """The cap excludes the next major version after every release the lock pins and
    pyproject.toml's comment names the reason."""
    text = (ROOT / "pyproject.toml").read_text()
    requirements = [Requirement(r) for r in tomllib.loads(text)["project"]["dependencies"]]
    (requirement,) = [r for r in requirements if canonicalize_name(r.name) == distribution]
    lock = (ROOT / "requirements" / "dev.lock").read_text()
    locked = re.findall(rf"^{re.escape(distribution)}==([^\s;]+)", lock, re.M | re.I)
    assert locked, f"{distribution} is not in requirements/dev.lock"
    newest = max(Version(v) for v in locked)
    next_major = f"{newest.major + 1}.0"
    assert not requirement.specifier.contains(next_major, prereleases=True), (
        f"{requirement} admits {next_major}, but rlm_kernel uses private members of "
        f"{distribution}: {sorted(m for m, d in PRIVATE_MEMBERS.items() if d == distribution)}")
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines)
              if re.match(r'\s*"([^"]+)"', line)
              and Requirement(re.match(r'\s*"([^"]+)"', line)[1]) == requirement)
    said = [lines[at]]
    while lines[at - 1].strip().startswith("#"):
        at -= 1
        said.append(lines[at])
    assert "private member" in " ".join(said), (
        f"pyproject.toml does not say, beside {requirement}, that it is capped for the "
        "private members used")


def test_litellm_private_member_exists():
    """``ModelResponse._hidden_params`` (``cache_hit``), read from litellm's source
    without importing litellm (seconds)."""
    spec = importlib.util.find_spec("litellm")
    assert spec and spec.origin
    source = (Path(spec.origin).parent / "types" / "utils.py").read_text()
    model_response = source[source.index("class ModelResponse("):]
    assert "_hidden_params" in model_response[:model_response.index("\nclass ")]
