"""The embedded model's server process: llama-cpp-python's OpenAI-compatible server
(``llama_cpp.server``), started with one guard for how llama.cpp was built.

ggml built with ``-march=native`` on a CPU that reports AMX (Intel Xeon since Sapphire
Rapids: ``amx_int8`` in ``/proc/cpuinfo``) places the weights in its AMX buffer type,
whose matrix kernels crash the server (SIGSEGV in ``ggml_backend_amx_mul_mat``) on the
first prompt longer than one token: seen with llama-cpp-python 0.3.36 on the Xeon
machines this project is tested on.  ``make setup`` builds without those kernels (the
Makefile's ``CMAKE_ARGS``), but ``pip install ".[local]"`` builds with them, so the
README's install would give a server that dies on its first request.

A build with them is recognised by llama.cpp's own system info (``AMX_INT8 = 1``), and
its model is then loaded with ``use_extra_bufts = False`` (the model parameter behind
llama.cpp's ``--no-repack``): no extra buffer type, so neither the AMX kernels nor the
CPU's weight repacking are used.  llama-cpp-python's ``Llama`` does not take that
parameter, so :func:`without_extra_buffer_types` sets it in the defaults every model
starts from, in this server process only, before anything is loaded.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, cast

__all__ = ["amx_built", "main", "without_extra_buffer_types"]

log = logging.getLogger(__name__)

PROGRAM = "llama_cpp.server"
"""The server's program name, kept on its command line (``ps``; the discovery of a
running server, :mod:`rlm_kernel.models.local.discovery`, looks for it)."""


def amx_built(system_info: bytes | None = None) -> bool:
    """True when the installed llama.cpp was compiled with its AMX kernels.

    Args:
        system_info: llama.cpp's system info line (``llama_print_system_info()``, e.g.
            ``b"CPU : SSE3 = 1 | ... | AMX_INT8 = 1 | ..."``); read from llama.cpp when None.
    """
    if system_info is None:
        import llama_cpp

        system_info = llama_cpp.llama_print_system_info()
    return b"AMX_INT8 = 1" in system_info


def without_extra_buffer_types() -> None:
    """Make every model this process loads start from ``use_extra_bufts = False``
    (the module docstring says why).  Call before a model is loaded."""
    from llama_cpp import llama_cpp as capi

    defaults = capi.llama_model_default_params

    def model_defaults() -> Any:  # llama.cpp's llama_model_params structure
        params = defaults()
        params.use_extra_bufts = False
        return params

    capi.llama_model_default_params = model_defaults


def main(argv: list[str] | None = None) -> None:
    """Run the server with ``argv`` (its options; default ``sys.argv[2:]``, after the
    program name that :func:`~rlm_kernel.models.local.launcher.server_command` puts first).

    The options are llama-cpp-python's (parsed by its own ``llama_cpp.server.cli``), and
    ``--keep_alive SECONDS`` (rlm-kernel's, default 0): the app is wrapped in an
    :class:`~rlm_kernel.models.local.keep_alive.IdleWatch` that, after that many idle
    seconds, removes the model's state file (when it names this server and no other
    process holds the start lock) and ends the server as uvicorn ends on SIGTERM.  A
    request whose client goes stops the model's evaluation for it at once, mid-prompt
    too (:mod:`~rlm_kernel.models.local.abort`).

    Raises:
        SystemExit: from the option parser on a bad option.
    """
    import argparse

    import uvicorn
    from llama_cpp.server.app import create_app
    from llama_cpp.server.cli import add_args_from_model, parse_model_from_args
    from llama_cpp.server.settings import ModelSettings, ServerSettings, Settings

    from .abort import AbortOnDisconnect, abort_when_client_gone
    from .discovery import remove_state, start_lock
    from .keep_alive import IdleWatch
    from .weights import get_spec

    args = sys.argv[2:] if argv is None else argv
    if amx_built():
        without_extra_buffer_types()
        log.warning("rlm-kernel: llama.cpp was built with its AMX kernels, which crash on "
                    "some CPUs; the model is loaded without extra buffer types (no AMX, no "
                    "weight repacking). make setup builds without them.")
    parser = argparse.ArgumentParser(prog=PROGRAM)
    add_args_from_model(parser, Settings)
    parser.add_argument("--keep_alive", type=float, default=0.0,
                        help="seconds idle before the server stops itself (0: never)")
    options = parser.parse_args(args)
    # (its parser is annotated as returning the class it is given; it returns an instance)
    server_settings = cast(ServerSettings, parse_model_from_args(ServerSettings, options))
    model_settings = cast(ModelSettings, parse_model_from_args(ModelSettings, options))
    abort_when_client_gone()  # before the model (and its context) is loaded
    app = create_app(server_settings=server_settings, model_settings=[model_settings])
    spec = get_spec(options.model_alias)
    server: uvicorn.Server | None = None

    def stop_when_idle() -> bool:
        with start_lock(spec, timeout=0) as held:
            if not held:  # a process is finding or starting a server: it may pick us
                return False
            remove_state(spec, os.getpid())
        if server is not None:
            server.should_exit = True  # as on SIGTERM: no request is in flight
        return True

    watched = IdleWatch(AbortOnDisconnect(app), options.keep_alive, stop_when_idle)
    server = uvicorn.Server(uvicorn.Config(watched, host=server_settings.host,
                                           port=server_settings.port))
    server.run()
