"""The package's log records reach the kernel's log (its process stderr), not a cell."""

from __future__ import annotations

from jupyter_client.manager import start_new_kernel


def test_package_log_records_go_to_the_kernel_log_not_the_cell(tmp_path):
    err = (tmp_path / "kernel.err").open("wb")
    km, kc = start_new_kernel(kernel_name="rlm", startup_timeout=60, stderr=err)
    outputs: list[dict] = []
    try:
        kc.execute_interactive(
            "import logging\n"
            "logging.getLogger('rlm_kernel.engine.run').error('probe %s', 'engine-123')\n"
            "logging.getLogger('rlm_kernel.models.local.server').warning('probe server-456')",
            output_hook=outputs.append, timeout=60)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        err.close()
    log = (tmp_path / "kernel.err").read_text()
    assert "[rlm_kernel.engine.run] ERROR | probe engine-123" in log
    assert "[rlm_kernel.models.local.server] WARNING | probe server-456" in log
    assert not [m for m in outputs if m["msg_type"] in ("stream", "error")]
