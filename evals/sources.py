"""The real documents the eval asks about, loaded from this machine and split dev/test.

Four sources, all found on a Debian machine with Python:

* the running interpreter's standard library (``sysconfig.get_paths()["stdlib"]``):
  fixed, disjoint sets of packages per split, plus the top-level modules split by a
  stable hash of the module name;
* Debian's licence texts (``/usr/share/common-licenses``), two fixed disjoint sets;
* the dpkg database (``/var/lib/dpkg/status``), records split by a stable hash of the
  package name;
* Debian changelogs (``/usr/share/doc/*/changelog.Debian.gz``): well-formed ones only,
  one per source package (the alphabetically first folder), split by a stable hash of
  the package folder name.

Everything is cached per process.  A source missing on this machine yields nothing
(empty dict / list); the generators then raise :class:`evals.base.Unavailable`.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import sysconfig
from dataclasses import dataclass
from functools import cache
from pathlib import Path

__all__ = [
    "SPLITS", "STDLIB_PACKAGES", "RESERVED", "LICENSE_SPLIT", "LICENSES_DIR", "DPKG_STATUS",
    "DOC_DIR", "stable_split", "stdlib_dir", "stdlib_packages", "stdlib_package",
    "stdlib_modules", "stdlib_units", "licenses", "PkgRecord", "dpkg_records",
    "dpkg_text", "depends_names", "Entry", "Changelog", "changelogs", "concat",
    "all_stdlib_files",
]

SPLITS = ("dev", "test")
# Packages present in CPython 3.10-3.13 (missing ones are skipped).
STDLIB_PACKAGES: dict[str, tuple[str, ...]] = {
    "dev": ("logging", "http", "urllib", "concurrent", "importlib", "xmlrpc", "ctypes",
            "html", "wsgiref", "dbm", "curses", "pydoc_data"),
    "test": ("asyncio", "unittest", "multiprocessing", "xml", "tomllib", "sqlite3",
             "zoneinfo", "re", "collections", "venv"),
}
# Reserved for the project's own tests and demo: never used here.
RESERVED = frozenset({"email", "json"})
# Top-level modules never used (jokes, machine-specific, generated).
_SKIP_MODULES = re.compile(r"^(this|antigravity|sitecustomize|usercustomize|_sysconfigdata.*"
                           r"|__hello__|__phello__.*|_distutils_system_mod)\.py$")
_SKIP_DIRS = {"test", "tests", "idle_test", "__pycache__", "site-packages", "dist-packages"}

LICENSES_DIR = Path("/usr/share/common-licenses")
LICENSE_SPLIT: dict[str, tuple[str, ...]] = {
    "dev": ("Apache-2.0", "BSD", "GFDL-1.2", "GPL-1", "GPL-3", "LGPL-2", "MPL-1.1"),
    "test": ("Artistic", "CC0-1.0", "GFDL-1.3", "GPL-2", "LGPL-2.1", "LGPL-3", "MPL-2.0"),
}
DPKG_STATUS = Path("/var/lib/dpkg/status")
DOC_DIR = Path("/usr/share/doc")


def stable_split(name: str) -> str:
    """``"dev"`` or ``"test"`` from SHA-256 of ``name`` (never Python's salted ``hash``)."""
    return SPLITS[hashlib.sha256(name.encode("utf-8")).digest()[0] % 2]


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be 'dev' or 'test', not {split!r}")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


# ---------------------------------------------------------------- standard library

def stdlib_dir() -> Path:
    """The standard library folder of the running interpreter."""
    return Path(sysconfig.get_paths()["stdlib"])


@cache
def stdlib_package(name: str) -> dict[str, str]:
    """``{"pkg/sub/file.py": source}`` of one stdlib package, sorted, tests excluded."""
    if name in RESERVED:
        raise ValueError(f"the stdlib package {name!r} is reserved")
    root = stdlib_dir()
    folder = root / name
    if not folder.is_dir():
        return {}
    files = {}
    for path in sorted(folder.rglob("*.py")):
        rel = path.relative_to(root)
        if _SKIP_DIRS.intersection(rel.parts[:-1]) or not path.is_file():
            continue
        files[rel.as_posix()] = _read(path)
    return files


@cache
def stdlib_packages(split: str) -> dict[str, dict[str, str]]:
    """The split's packages that exist here: ``{package: {path: source}}``."""
    _check_split(split)
    out = {}
    for name in STDLIB_PACKAGES[split]:
        files = stdlib_package(name)
        if files:
            out[name] = files
    return out


@cache
def stdlib_modules(split: str) -> dict[str, str]:
    """The split's top-level modules ``{"argparse.py": source}`` (stable hash of the name)."""
    _check_split(split)
    root = stdlib_dir()
    if not root.is_dir():
        return {}
    packages = {p for names in STDLIB_PACKAGES.values() for p in names} | RESERVED
    out = {}
    for path in sorted(root.glob("*.py")):
        name = path.name
        if (_SKIP_MODULES.match(name) or path.stem in packages or not path.is_file()
                or stable_split(path.stem) != split):
            continue
        out[name] = _read(path)
    return out


def stdlib_units(split: str) -> set[str]:
    """Names of the split's stdlib units (packages and module stems), as used in ``source``."""
    return set(stdlib_packages(split)) | {Path(m).stem for m in stdlib_modules(split)}


@cache
def all_stdlib_files(split: str) -> dict[str, str]:
    """Every stdlib file of the split: top-level modules, then the packages' files."""
    files = dict(stdlib_modules(split))
    for pkg in stdlib_packages(split).values():
        files.update(pkg)
    return dict(sorted(files.items()))


HEADERS = {
    "hash": "### FILE: {}",
    "arrows": "==> {} <==",
    "dashes": "--- {} ---",
    "equals": "=== {} ===",
    # Shapes with a constant label before the name (names without an extension, with
    # spaces or dots): the helpers must find them by shape, or take them as header=.
    "licence": "=== LICENSE FILE: {}",
    "module": "<<< MODULE {} >>>",
}


def concat(files: dict[str, str], style: str) -> str:
    """Join texts into one string, each preceded by a header line in ``style``."""
    head = HEADERS[style]
    parts = []
    for name, text in files.items():
        parts.append(head.format(name) + "\n" + text.rstrip("\n") + "\n")
    return "\n".join(parts)


# ---------------------------------------------------------------- licences

@cache
def licenses(split: str) -> dict[str, str]:
    """``{name: text}`` of the split's licence texts that exist here (symlinks skipped)."""
    _check_split(split)
    out = {}
    for name in LICENSE_SPLIT[split]:
        path = LICENSES_DIR / name
        if path.is_file() and not path.is_symlink():
            out[name] = _read(path)
    return out


# ---------------------------------------------------------------- dpkg status

@dataclass(frozen=True)
class PkgRecord:
    """One dpkg status record: the package name, its fields and its raw text."""

    name: str
    fields: dict[str, str]
    raw: str

    def size(self) -> int:
        """``Installed-Size`` in KiB (0 if absent)."""
        value = self.fields.get("Installed-Size", "0").strip()
        return int(value) if value.isdigit() else 0

    def maintainer_name(self) -> str:
        """The Maintainer field without the e-mail address."""
        return self.fields.get("Maintainer", "").split("<")[0].strip()


def _parse_record(raw: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    key = None
    for line in raw.split("\n"):
        if line[:1] in (" ", "\t") and key is not None:
            fields[key] += "\n" + line
        elif ":" in line:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


@cache
def _all_dpkg_records() -> tuple[PkgRecord, ...]:
    if not DPKG_STATUS.is_file():
        return ()
    text = _read(DPKG_STATUS)
    records = []
    seen = set()
    for raw in re.split(r"\n\s*\n", text):
        raw = raw.strip("\n")
        if not raw.strip():
            continue
        fields = _parse_record(raw)
        name = fields.get("Package")
        if not name or name in seen or "Version" not in fields:
            continue
        seen.add(name)
        records.append(PkgRecord(name, fields, raw))
    return tuple(sorted(records, key=lambda r: r.name))


@cache
def dpkg_records(split: str) -> tuple[PkgRecord, ...]:
    """The split's half of the dpkg records (stable hash of the package name), by name."""
    _check_split(split)
    return tuple(r for r in _all_dpkg_records() if stable_split(r.name) == split)


@cache
def dpkg_text(split: str) -> str:
    """The split's records as one dpkg-status-style text (records separated by blank lines)."""
    return "\n\n".join(r.raw for r in dpkg_records(split)) + "\n"


def depends_names(value: str) -> list[str]:
    """Package names in a Depends-style field (alternatives, versions, arch qualifiers dropped)."""
    names = []
    for group in value.split(","):
        for alt in group.split("|"):
            name = alt.strip().split(" ")[0].split("(")[0].split(":")[0].strip()
            if name and name not in names:
                names.append(name)
    return names


# ---------------------------------------------------------------- changelogs

_HEADER = re.compile(r"^(\S+) \(([^()\s]+)\) ([^;]+); *urgency=(\w+)", re.M)
_TRAILER = re.compile(r"^ -- (.+?) <([^>]*)>  (.+?)[ \t]*$", re.M)


@dataclass(frozen=True)
class Entry:
    """One changelog entry: header fields, the sign-off line's fields and the entry's text."""

    package: str
    version: str
    distribution: str
    urgency: str
    signer: str
    email: str
    date: str
    text: str


@dataclass(frozen=True)
class Changelog:
    """A well-formed Debian changelog: its folder name, text and entries (newest first)."""

    folder: str
    text: str
    entries: tuple[Entry, ...]


def _parse_changelog(folder: str, text: str) -> Changelog | None:
    """Entries of a changelog, or None unless every way of counting entries agrees."""
    headers = list(_HEADER.finditer(text))
    trailers = list(_TRAILER.finditer(text))
    if not headers or len(headers) != len(trailers):
        return None
    signoffs = len(re.findall(r"^ -- ", text, re.M))
    if len(headers) != text.count("urgency=") or len(headers) != signoffs:
        return None
    entries = []
    for i, (head, tail) in enumerate(zip(headers, trailers, strict=True)):
        nxt = headers[i + 1].start() if i + 1 < len(headers) else len(text)
        if not head.end() <= tail.start() < tail.end() <= nxt:
            return None
        entries.append(Entry(head[1], head[2], head[3].strip(), head[4], tail[1].strip(),
                             tail[2], tail[3], text[head.start():tail.end()]))
    return Changelog(folder, text, tuple(entries))


@cache
def _all_changelogs() -> tuple[Changelog, ...]:
    if not DOC_DIR.is_dir():
        return ()
    by_source: dict[str, Changelog] = {}
    for path in sorted(DOC_DIR.glob("*/changelog.Debian.gz")):
        if path.is_symlink() or path.parent.is_symlink():
            continue
        try:
            text = gzip.decompress(path.read_bytes()).decode("utf-8", errors="replace")
        except (OSError, EOFError):
            continue
        log = _parse_changelog(path.parent.name, text)
        if log is None:
            continue
        # One changelog per source package (binary packages of one source share it).
        source = log.entries[0].package
        if source not in by_source or log.folder < by_source[source].folder:
            by_source[source] = log
    return tuple(sorted(by_source.values(), key=lambda c: c.folder))


@cache
def changelogs(split: str) -> dict[str, Changelog]:
    """The split's well-formed changelogs ``{folder: Changelog}`` (stable hash of the folder)."""
    _check_split(split)
    return {c.folder: c for c in _all_changelogs() if stable_split(c.folder) == split}
