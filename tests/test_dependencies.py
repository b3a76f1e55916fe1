"""The dependencies pyproject.toml admits: never a release known to be compromised."""

from __future__ import annotations

from pathlib import Path

import tomllib
from packaging.requirements import Requirement

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
