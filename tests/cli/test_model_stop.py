"""``rlm model stop`` aimed at a server it may not signal (another user's process):
one readable line naming the server and who can stop it, exit status 1."""

from __future__ import annotations

from rlm_kernel.cli import model as model_cli
from rlm_kernel.models.local.discovery import ServerInfo


def test_stopping_another_users_server_says_so(monkeypatch, capsys):
    theirs = ServerInfo(model="qwen2.5-coder-0.5b", port=8765, pid=4242, n_ctx=8192)

    def refused(name, grace=3.0):
        raise PermissionError(1, "Operation not permitted")  # os.kill's, no filename

    monkeypatch.setattr(model_cli, "stop_running", refused)
    monkeypatch.setattr(model_cli, "find_running", lambda name: theirs)
    assert model_cli.model_command("stop", None) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "None" not in err
    assert "(pid 4242) is another user's process" in err and "root can stop it" in err
