"""Warm start of a new RLM kernel: litellm imported and the embedded server's prompt head
read in the background, before any task (``c.RLM.warm_start``)."""

from __future__ import annotations

import os
import time

import pytest

from rlm_kernel.jupyter.settings import RLMSettings
from tests.kernel_client import running


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("0", False), ("off", False),
                                                 (None, True)])
def test_the_default_follows_rlm_warm_start(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("RLM_WARM_START", raising=False)
    else:
        monkeypatch.setenv("RLM_WARM_START", value)
    assert RLMSettings().warm_start is expected


@pytest.mark.slow
def test_a_new_kernel_warms_the_embedded_model_before_any_task(tmp_path, local_server):
    err_path = tmp_path / "kernel.err"
    env = {**os.environ, "RLM_WARM_START": "1"}
    env.pop("RLM_MODEL", None)
    with err_path.open("wb") as err, running("rlm", stderr=err, env=env,
                                             extra_arguments=["--log-level=INFO"]):
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if "system prompt evaluated" in err_path.read_text():
                break
            time.sleep(1)
    log = err_path.read_text()
    assert "[rlm_kernel.engine.session.warmup] warm start: litellm imported, embedded server " \
           "ready and system prompt evaluated in" in log
    assert "warm start failed" not in log
