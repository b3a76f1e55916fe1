"""Install the ``rlm`` kernelspec, the way ``python -m ipykernel install`` does.

    python -m rlm_kernel install [--user | --sys-prefix | --prefix PATH]
                                 [--name NAME] [--display-name TEXT]

A wheel install already puts the spec in ``<prefix>/share/jupyter/kernels/rlm``
(hatch ``shared-data``); this command is for editable installs (which do not
install shared data), for other prefixes, and for a second spec under another
name. Unlike the shipped spec (``argv[0] == "python"``, which jupyter_client
replaces by its own ``sys.executable``), the installed one names this
interpreter, so it works from any Jupyter, whatever environment that runs in.
"""

from __future__ import annotations

import argparse
import errno
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["DISPLAY_NAME", "KERNEL_NAME", "LOGOS", "SPEC_DIR", "install", "kernel_dict", "main"]

KERNEL_NAME = "rlm"
DISPLAY_NAME = "RLM (Python)"
LOGOS = ("logo-32x32.png", "logo-64x64.png", "logo-svg.svg")
# The shipped spec (kernel.json and logos), inside the package as ipykernel keeps its
# ``resources/``: the same folder in a source tree, an editable install and a wheel.
SPEC_DIR = Path(__file__).resolve().parent / "resources"


def kernel_dict(executable: str | None = None, display_name: str = DISPLAY_NAME) -> dict[str, Any]:
    """The content of ``kernel.json``; ``executable`` defaults to ``sys.executable``."""
    return {
        "argv": [executable or sys.executable, "-m", "rlm_kernel", "-f", "{connection_file}"],
        "display_name": display_name,
        "language": "python",
        "interrupt_mode": "signal",
        "metadata": {"debugger": False},
    }


def _copy_logos(dest: Path) -> None:
    """Copy the shipped logos into ``dest``."""
    for name in LOGOS:
        shutil.copyfile(SPEC_DIR / name, dest / name)


def install(*, user: bool = False, prefix: str | None = None, name: str = KERNEL_NAME,
            display_name: str | None = None) -> str:
    """Write the kernelspec (argv pointing at this interpreter) and return its folder.

    Args:
        user: install for the current user (``~/.local/share/jupyter/kernels``).
        prefix: install under ``PREFIX/share/jupyter/kernels`` (``sys.prefix`` for a venv).
        name: the kernelspec name (``jupyter kernelspec list``, notebook metadata).
        display_name: the name shown in launchers; default "RLM (Python)", or
            the name itself when ``name`` is not ``rlm`` (as ipykernel does).

    Raises:
        OSError: the destination cannot be written.
    """
    from jupyter_client.kernelspec import KernelSpecManager

    if display_name is None:
        display_name = DISPLAY_NAME if name == KERNEL_NAME else name
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / name
        staged.mkdir()
        _copy_logos(staged)
        (staged / "kernel.json").write_text(
            json.dumps(kernel_dict(display_name=display_name), indent=1) + "\n")
        return KernelSpecManager().install_kernel_spec(str(staged), name, user=user,
                                                       prefix=prefix)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry of ``python -m rlm_kernel install``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m rlm_kernel install",
                                     description="Install the RLM kernelspec for Jupyter.")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true",
                       help="install for the current user instead of system-wide")
    where.add_argument("--sys-prefix", action="store_const", const=sys.prefix, dest="prefix",
                       help=f"install in this Python's prefix ({sys.prefix}); for venvs")
    where.add_argument("--prefix", help="install under PREFIX/share/jupyter/kernels")
    parser.add_argument("--name", default=KERNEL_NAME,
                        help=f"kernelspec name (default {KERNEL_NAME!r})")
    parser.add_argument("--display-name",
                        help=f"name shown in launchers (default {DISPLAY_NAME!r})")
    args = parser.parse_args(argv)
    try:
        path = install(user=args.user, prefix=args.prefix, name=args.name,
                       display_name=args.display_name)
    except OSError as e:
        if e.errno == errno.EACCES:
            print(e, file=sys.stderr)
            if not args.user:
                print("Perhaps you want `sudo` or `--user`?", file=sys.stderr)
            return 1
        raise
    print(f"Installed kernelspec {args.name} in {path}")
    return 0
