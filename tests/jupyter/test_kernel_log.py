"""The package's log records reach the kernel's log (its process stderr), not a cell."""

from __future__ import annotations

from tests.kernel_client import running


def test_package_log_records_go_to_the_kernel_log_not_the_cell(tmp_path):
    outputs: list[dict] = []
    with (tmp_path / "kernel.err").open("wb") as err, running("rlm", stderr=err) as (_, kc):
        kc.execute_interactive(
            "import logging\n"
            "logging.getLogger('rlm_kernel.engine.run').error('probe %s', 'engine-123')\n"
            "logging.getLogger('rlm_kernel.models.local.server').warning('probe server-456')",
            output_hook=outputs.append, timeout=60)
    log = (tmp_path / "kernel.err").read_text()
    assert "[rlm_kernel.engine.run] ERROR | probe engine-123" in log
    assert "[rlm_kernel.models.local.server] WARNING | probe server-456" in log
    assert not [m for m in outputs if m["msg_type"] in ("stream", "error")]
