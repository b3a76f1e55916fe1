"""``python -m rlm_kernel``: start the RLM kernel, or ``install`` its kernelspec.

    python -m rlm_kernel -f CONNECTION_FILE [kernel options]   (what kernel.json runs)
    python -m rlm_kernel install [--user | --sys-prefix | --prefix P] [--name N]

Start-up stays as cheap as ipykernel's: litellm and the engine load on first use.
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    """Dispatch: ``install ...`` installs the kernelspec; anything else starts a kernel."""
    if len(sys.argv) > 1 and sys.argv[1] == "install":
        from .jupyter.install import main as install_main

        sys.exit(install_main(sys.argv[2:]))
    # As ipykernel_launcher does: keep the working directory (a notebook's folder) off
    # sys.path while the kernel's own modules load; IPython puts it back for user code.
    if sys.path and (sys.path[0] == "" or Path(sys.path[0]) == Path.cwd()):
        del sys.path[0]
    from .jupyter.kernelapp import main as kernel_main

    kernel_main()


if __name__ == "__main__":
    main()
