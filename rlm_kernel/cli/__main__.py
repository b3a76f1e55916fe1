"""``python -m rlm_kernel.cli``: the ``rlm`` command."""

from __future__ import annotations

import sys

from .run import main

if __name__ == "__main__":
    sys.exit(main())
