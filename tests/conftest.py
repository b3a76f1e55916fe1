"""Shared fixtures: one embedded-model server for every slow test and kernel."""

from __future__ import annotations

import os
import signal

import pytest


def pytest_configure(config: pytest.Config) -> None:
    """A session started in the background by a non-interactive shell (``make test &``,
    ``nohup``) inherits SIGINT ignored; the tests of the user's interrupt (Ctrl-C, the
    stop button) and the commands they start (``rlm model serve`` stopped by Ctrl-C)
    need it as a terminal gives it."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

# Kernels and shells of the tests start cold: a warm start (c.RLM.warm_start) would
# send each new kernel's system prompt to the shared server in the background.
# tests/jupyter/test_warm_start.py turns it back on where it is the subject.
os.environ["RLM_WARM_START"] = "0"
# The embedded model's server stops with the process that started it (keep_alive 0): a
# server kept up after its test (300 s by default) would hold a test's own cache folder
# and 1 GB of memory.  tests/models/test_keep_alive.py sets it where it is the subject.
os.environ["RLM_KEEP_ALIVE"] = "0"


@pytest.fixture(scope="session")
def local_server():
    """Start (or find) the embedded model's server once; kernels started by the
    tests find it through its state file instead of starting their own."""
    from rlm_kernel.models.local.server import ensure_server

    return ensure_server()


@pytest.fixture()
def kernel_name() -> str:
    """The kernelspec the ``kernel`` fixture starts: ``rlm``.  A module or test that
    needs another (``python3``, the ``%rlm`` magic after ``%load_ext rlm_kernel``)
    parametrises ``kernel_name`` (``@pytest.mark.parametrize("kernel_name", [...])``)."""
    return "rlm"


@pytest.fixture()
def kernel(kernel_name: str):
    """A real kernel of ``kernel_name`` started by jupyter_client for this test and shut
    down after it: ``(manager, client)``.  Code runs in it through the helpers of
    tests/kernel_client.py (``execute``, ``script_model`` ...)."""
    from tests.kernel_client import running

    with running(kernel_name) as started:
        yield started


@pytest.fixture()
def kc(kernel):
    """The client of this test's ``kernel``."""
    return kernel[1]


@pytest.fixture()
def exporter():
    """Tracing on (``otel``), its spans kept by the OpenTelemetry SDK's in-memory exporter;
    off again afterwards."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rlm_kernel.models import tracing

    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    tracing.enable(["otel"], tracer_provider=provider)
    yield spans
    tracing.disable()


@pytest.fixture()
def ip():
    """The IPython shell of this test process with ``%load_ext rlm_kernel``."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    start_ipython()
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "rlm_kernel")
    # one shell for the whole process: each test starts a new conversation, no tools
    magics = shell.magics_manager.registry["RLMMagics"]
    magics.conversation.clear()
    magics.tools = []
    magics.cell_log.clear()  # an export's setup cells are this test's own
    return shell
