"""Print the llama-cpp-python entry of the lock (requirements/dev.lock: the version
and the sha256 of its sdist), a requirements-file line for `pip install
--require-hashes`, so that ``make setup`` builds, for this CPU, exactly the release
that was tested.  Exits 1 with one line if the lock has no such entry or one that
pyproject.toml's ``local`` extra does not admit (run ``make lock``).

The lock's format (what ``uv pip compile --generate-hashes`` writes) is read by
:func:`read_lock`, which tests/test_lock.py uses too."""

from __future__ import annotations

import argparse
import pathlib
import sys
from dataclasses import dataclass

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the parser pip itself carries
    from pip._vendor import tomli as tomllib
try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ModuleNotFoundError:  # before the lock is installed: the copy pip carries
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "dev.lock"
PACKAGE = "llama-cpp-python"


@dataclass(frozen=True)
class LockEntry:
    """One pinned package of a lock file.

    ``requirement`` is the entry without its hashes (``name==version`` and any
    ``; marker``), ``version`` the pinned version (str), ``hashes`` the
    ``sha256:<hex>`` strings given for it (empty if none), ``text`` the entry as
    written, backslash continuations joined (a requirements-file line)."""

    requirement: Requirement
    version: str
    hashes: tuple[str, ...]
    text: str

    @property
    def name(self) -> str:
        """The normalized project name (PEP 503: lower case, runs of ``-_.`` as ``-``)."""
        return canonicalize_name(self.requirement.name)


def read_lock(path: pathlib.Path) -> list[LockEntry]:
    """Parse a hash-pinned requirements file such as ``uv pip compile
    --generate-hashes`` writes: one entry per package (``name==version [; marker]``
    followed by ``--hash=sha256:...`` options on continuation lines), ``#`` comments.

    Raises ``ValueError`` naming the line for an entry that is not pinned with ``==``
    or that pip would not parse as a requirement; ``OSError`` if ``path`` cannot be
    read."""
    logical: list[str] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line
        if pending.strip():
            logical.append(" ".join(pending.split()))
        pending = ""
    entries = []
    for text in logical:
        spec, *options = text.split(" --")
        hashes = tuple(o.removeprefix("hash=") for o in options if o.startswith("hash="))
        try:
            requirement = Requirement(spec)
        except Exception as exc:
            raise ValueError(f"{path}: not a requirement: {text!r} ({exc})") from None
        pins = [s for s in requirement.specifier if s.operator == "=="]
        if len(pins) != 1 or len(requirement.specifier) != 1:
            raise ValueError(f"{path}: not pinned with ==: {text!r}")
        entries.append(LockEntry(requirement, pins[0].version, hashes, text))
    return entries


def locked_requirement(lock: pathlib.Path = LOCK) -> str:
    """The lock's entry for llama-cpp-python (version and hashes), checked against the
    requirement of pyproject.toml's ``local`` extra.  Raises ``SystemExit`` with one
    line when the lock has none, several, or one pyproject.toml does not admit."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    wanted = next(Requirement(r) for r in extras["local"]
                  if Requirement(r).name.lower() == PACKAGE)
    found = [e for e in read_lock(lock) if e.name == PACKAGE]
    if len(found) != 1:
        raise SystemExit(f"{lock}: {len(found)} entries for {PACKAGE}, not 1: run make lock")
    if not wanted.specifier.contains(found[0].version, prereleases=True):
        raise SystemExit(f"{lock} pins {PACKAGE}=={found[0].version} but pyproject.toml "
                         f"asks for {wanted}: run make lock")
    return found[0].text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lock", type=pathlib.Path, default=LOCK,
                        help="the lock file to read (default: %(default)s)")
    print(locked_requirement(parser.parse_args().lock))


if __name__ == "__main__":
    sys.exit(main())
