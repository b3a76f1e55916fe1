"""A real JupyterLab in a real browser, for the browser tests and the latency bench.

Used by ``tests/jupyter/test_browser.py`` and ``bench/bench_cell_latency.py``:

* :class:`JupyterLab` starts ``jupyter lab`` on 127.0.0.1 (free port, random token,
  its own root, settings, workspaces and runtime folders, no network look-ups,
  ``window.jupyterapp`` exposed) and stops it.
* :class:`KernelGateway` starts ``jupyter kernelgateway`` on 127.0.0.1 (free port, auth
  token, its own working and runtime folders, the venv's kernelspecs); a
  :class:`JupyterLab` made with its :meth:`~KernelGateway.lab_args` runs every kernel
  there (``--gateway-url``).  Used by ``tests/jupyter/test_gateway.py``.
* :func:`launch_chromium` opens Debian's Chromium (``/usr/bin/chromium``, installed by
  ``scripts/install_browser.sh``) through Playwright with a fresh user-data-dir.
  Playwright's own browsers are never downloaded.
* :class:`NotebookPage` drives one notebook: open, wait for the kernel, run all cells,
  read the cells (model metadata, prompt, rendered text), save, screenshot (into
  :data:`SCREENSHOTS`: ``$RLM_SCREENSHOTS``, else ``build/screenshots/``, git-ignored).

Nothing here knows about the RLM extension beyond the cell metadata it writes
(``metadata.rlm = {run_id, step, role, task_cell}``), see ``docs/protocol.md``.
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import nbformat

CHROMIUM = "/usr/bin/chromium"
EXTENSION_NAME = "rlm-kernel-labextension"
REPO_ROOT = Path(__file__).resolve().parents[1]
SCREENSHOTS = Path(os.environ.get("RLM_SCREENSHOTS") or REPO_ROOT / "build" / "screenshots")
"""Where the browser tests save a screenshot of every view they check."""
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LOAD_JSON_CELL = (
    "from rlm_kernel.context.files import load_folder\n"
    "from evals.questions import stdlib_dir\n"
    'context = {k: v for k, v in load_folder(stdlib_dir() / "json").items() if k.endswith(".py")}'
)


def venv_bin(name: str) -> str:
    """Path of an executable next to the running interpreter (the project's venv)."""
    return str(Path(sys.executable).parent / name)


def missing_prerequisites() -> list[str]:
    """What is missing to run a browser test here (empty list: all present)."""
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"{CHROMIUM} (run scripts/install_browser.sh)")
    for module, requirement in (("playwright", "playwright"),
                                ("jupyterlab", "jupyterlab>=4.6,<4.7")):
        try:
            __import__(module)
        except ImportError:
            missing.append(f"Python package {requirement!r}")
    return missing


def extension_installed() -> bool:
    """True if ``jupyter labextension list`` shows the RLM JupyterLab extension."""
    try:
        out = subprocess.run([venv_bin("jupyter"), "labextension", "list"],
                             capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return False
    listing = out.stdout + out.stderr
    return any(EXTENSION_NAME in line and "enabled" in line for line in listing.splitlines())


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_notebook(path: Path, kernel_name: str, display_name: str,
                   cells: list[str]) -> Path:
    """Write a v4 notebook of code cells (no outputs) for the given kernelspec."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": kernel_name, "display_name": display_name,
                                 "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    nbformat.validate(nb)
    path.write_text(nbformat.writes(nb), encoding="utf-8")
    return path


class ServerProcess(abc.ABC):
    """A Jupyter server process (``jupyter lab``, ``jupyter kernelgateway``) on 127.0.0.1
    in a temporary folder, started in its own process group; use as a context manager.
    Subclasses give :meth:`command`, :meth:`ready` and the ``name`` and ``prefix``.

    Attributes:
        port / token / url: where it listens and its token.
        log: the server's combined stdout/stderr file.
    """

    name = "server"  # for messages
    prefix = "rlm-server-"  # of the temporary folder

    def __init__(self, start_timeout: float) -> None:
        self.start_timeout = start_timeout
        self.token = secrets.token_hex(24)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._tmp = Path(tempfile.mkdtemp(prefix=self.prefix))
        self.log = self._tmp / f"{self.name.split()[-1]}.log"
        self.proc: subprocess.Popen | None = None
        self._log_file: Any = None

    @abc.abstractmethod
    def command(self) -> list[str]:
        """The server's command line."""

    @abc.abstractmethod
    def ready(self) -> bool:
        """Whether the server answers; raises ``OSError``/``URLError`` while it cannot."""

    def _launch(self, cwd: Path, env: dict[str, str]) -> None:
        """Start :meth:`command` in ``cwd`` and wait until :meth:`ready`.

        Raises:
            RuntimeError: the server exited, or was not ready within ``start_timeout``
                seconds (with its log's tail)."""
        env["JUPYTER_RUNTIME_DIR"] = str(self._tmp / "runtime")
        self._log_file = open(self.log, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.command(), cwd=cwd, env=env,
                                     stdout=self._log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter {self.name} exited with "
                                   f"{self.proc.returncode}:\n{self.log_tail()}")
            try:
                if self.ready():
                    return
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"jupyter {self.name} not ready after {self.start_timeout} s:\n"
                           + self.log_tail())

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of the server log."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, then SIGKILL)."""
        proc, self.proc = self.proc, None
        stop_process_group(proc)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def cleanup(self) -> None:
        """Remove the temporary folder (after :meth:`stop`)."""
        shutil.rmtree(self._tmp, ignore_errors=True)

    @abc.abstractmethod
    def start(self) -> ServerProcess:
        """Start the server (:meth:`_launch`) and return it, ready."""

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        self.cleanup()


class JupyterLab(ServerProcess):
    """A ``jupyter lab`` server in a temporary folder; use as a context manager.

    Attributes:
        root: the server's root folder (notebooks go here).
        port / token / url: where it listens and how to get in.
        log: the server's combined stdout/stderr file.
    """

    name = "lab"
    prefix = "rlm-lab-"

    def __init__(self, start_timeout: float = 90.0, extra_args: Sequence[str] = ()) -> None:
        """``extra_args``: more ``jupyter lab`` options (e.g. ``--gateway-url=...``)."""
        super().__init__(start_timeout)
        self.extra_args = list(extra_args)
        self.root = self._tmp / "root"
        self.root.mkdir()

    def command(self) -> list[str]:
        """The ``jupyter lab`` command line."""
        return [
            venv_bin("jupyter"), "lab",
            "--allow-root", "--no-browser",
            "--ip=127.0.0.1", f"--port={self.port}", "--port-retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root}",
            # No network look-ups: no news feed, no update check.
            "--LabApp.news_url=None",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            # Own settings and workspaces: no state from earlier runs or the user.
            f"--LabServerApp.user_settings_dir={self._tmp / 'settings'}",
            f"--LabServerApp.workspaces_dir={self._tmp / 'workspaces'}",
            # window.jupyterapp, to read cell models and hook the kernel connection.
            "--LabApp.expose_app_in_browser=True",
            *self.extra_args,
        ]

    def ready(self) -> bool:
        """Whether the REST API answers."""
        with urllib.request.urlopen(f"{self.url}/api/status?token={self.token}",
                                    timeout=2) as resp:
            return resp.status == 200

    def start(self) -> JupyterLab:
        """Start the server and wait until its REST API answers."""
        # No "get notified about official Jupyter news?" toast over the notebook.
        notification = (self._tmp / "settings" / "@jupyterlab" / "apputils-extension"
                        / "notification.jupyterlab-settings")
        notification.parent.mkdir(parents=True, exist_ok=True)
        notification.write_text(json.dumps({"fetchNews": "false"}))
        env = dict(os.environ)
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        env.pop("JUPYTER_TOKEN", None)
        self._launch(self.root, env)
        return self

    def notebook_url(self, name: str) -> str:
        """URL that opens ``name`` in a fresh (reset) workspace."""
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"


class KernelGateway(ServerProcess):
    """A Jupyter Kernel Gateway (``jupyter kernelgateway``, websocket personality) on
    127.0.0.1 in a temporary folder; use as a context manager.

    Kernels it starts run in its own working folder (:attr:`cwd`, not a lab server's
    root), with the environment a gateway gives them: ``PATH``, the variables named in
    ``env_whitelist`` that its own process has, and the ``KERNEL_*`` variables of the
    request.  Its kernelspecs are the venv's (``rlm`` is installed with ``--sys-prefix``).

    Attributes:
        port / token / url: where it listens and its auth token (``Authorization: token``).
        cwd: the gateway's working folder, where its kernels start.
        log: the gateway's combined stdout/stderr file.
    """

    name = "kernel gateway"
    prefix = "rlm-gateway-"

    def __init__(self, start_timeout: float = 60.0,
                 env_whitelist: Sequence[str] = ("HOME", "RLM_CACHE_DIR", "XDG_CACHE_HOME",
                                                 "LITELLM_LOCAL_MODEL_COST_MAP")) -> None:
        """``env_whitelist``: the gateway's own environment variables its kernels get
        (``KernelGatewayApp.env_process_whitelist``)."""
        super().__init__(start_timeout)
        self.env_whitelist = list(env_whitelist)
        self.cwd = self._tmp / "gateway-cwd"
        self.cwd.mkdir()

    def command(self) -> list[str]:
        """The ``jupyter kernelgateway`` command line."""
        return [
            venv_bin("jupyter"), "kernelgateway",
            "--KernelGatewayApp.ip=127.0.0.1", f"--KernelGatewayApp.port={self.port}",
            "--KernelGatewayApp.port_retries=0",
            "--KernelGatewayApp.api=kernel_gateway.jupyter_websocket",
            f"--KernelGatewayApp.auth_token={self.token}",
            # JupyterLab lists the kernels it may connect to (GET /api/kernels).
            "--JupyterWebsocketPersonality.list_kernels=True",
            *[f"--KernelGatewayApp.env_process_whitelist={name}"
              for name in self.env_whitelist],
        ]

    def lab_args(self) -> list[str]:
        """The ``jupyter lab`` options that make its kernels this gateway's."""
        return [f"--gateway-url={self.url}", f"--GatewayClient.auth_token={self.token}"]

    def ready(self) -> bool:
        """Whether the REST API answers."""
        self.get("/api")
        return True

    def start(self) -> KernelGateway:
        """Start the gateway and wait until its REST API answers."""
        self._launch(self.cwd, dict(os.environ))
        return self

    def get(self, path: str) -> Any:
        """GET ``path`` of the gateway's REST API with its token; the decoded JSON."""
        return self.request("GET", path)

    def request(self, method: str, path: str, body: Any = None,
                timeout: float = 60.0) -> Any:
        """``method`` ``path`` of the gateway's REST API with its token and ``body`` as
        JSON; the decoded JSON answer (None when empty).  Raises ``urllib.error.HTTPError``
        on an error status."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}{path}", data=data, method=method,
            headers={"Authorization": f"token {self.token}",
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return json.loads(resp.read() or b"null")

    def start_kernel(self, name: str = "rlm", env: dict[str, str] | None = None) -> str:
        """Ask the gateway for a kernel of kernelspec ``name``, with ``env`` (only its
        ``KERNEL_*`` variables reach the kernel), as JupyterLab's ``GatewayClient``
        does; its id."""
        return self.request("POST", "/api/kernels", {"name": name, "env": env or {}})["id"]

    def ws_url(self, kernel_id: str) -> str:
        """The websocket URL of a kernel's channels (``/api/kernels/<id>/channels``)."""
        return f"ws://127.0.0.1:{self.port}/api/kernels/{kernel_id}/channels"

    def kernels(self) -> list[dict[str, Any]]:
        """The gateway's running kernels (``GET /api/kernels``: id, name, state ...)."""
        return self.get("/api/kernels")

    def kernel_processes(self) -> list[Any]:
        """The gateway's kernel processes (``psutil.Process`` children running a
        kernel: ``-m rlm_kernel`` or ``ipykernel_launcher``)."""
        return kernel_processes(self.proc.pid) if self.proc is not None else []

    def stop(self) -> None:
        """Stop the gateway and its kernels: SIGTERM to its process group (it shuts its
        kernels down), then SIGKILL; a kernel still alive after that is killed."""
        kernels = self.kernel_processes()
        super().stop()
        for kernel in kernels:
            with contextlib.suppress(Exception):
                kernel.kill()


def kernel_processes(pid: int) -> list[Any]:
    """The kernel processes below process ``pid`` (``psutil.Process`` objects whose
    command line runs ``rlm_kernel`` or ``ipykernel_launcher``)."""
    import psutil

    found = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for child in children:
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "rlm_kernel" in cmdline or "ipykernel_launcher" in cmdline:
            found.append(child)
    return found


def stop_process_group(proc: subprocess.Popen | None, timeout: float = 20.0) -> None:
    """SIGTERM to ``proc``'s process group (started with ``start_new_session``), then
    SIGKILL after ``timeout`` seconds; nothing if it has already exited."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


@contextlib.contextmanager
def chromium_page(user_data_dir: Path, timeout_ms: int = 30_000) -> Iterator[Any]:
    """A Playwright page of Chromium in a persistent context with a fresh
    ``user_data_dir`` (:func:`launch_chromium`), ``timeout_ms`` milliseconds its
    default timeout; the context is closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        context = launch_chromium(pw, user_data_dir)
        try:
            page = context.new_page()
            page.set_default_timeout(timeout_ms)
            yield page
        finally:
            context.close()


def launch_chromium(playwright: Any, user_data_dir: Path, **kwargs: Any) -> Any:
    """Debian's Chromium in a Playwright persistent context with a fresh profile."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
        viewport={"width": 1400, "height": 1000}, **kwargs)


# JavaScript run in the page.  `panel()` is the current notebook panel.
_JS_PRELUDE = """
const panel = () => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return (w && w.content && w.content.widgets && w.sessionContext) ? w : null;
};
const promptOf = (cell) => {
  const p = cell.node.querySelector('.jp-InputArea-prompt');
  return p ? p.textContent.trim() : '';
};
const cellInfo = (cell, i) => {
  const m = cell.model;
  let outputs = [];
  if (m.type === 'code') { outputs = m.outputs.toJSON(); }
  return {
    index: i, id: m.id, type: m.type,
    rlm: m.getMetadata ? (m.getMetadata('rlm') ?? null) : null,
    prompt: promptOf(cell),
    execution_count: m.type === 'code' ? m.executionCount : null,
    mime: m.mimeType ?? null,
    source: m.sharedModel.getSource(),
    outputs: outputs,
    classes: cell.node.className,
    label: cell.node.dataset.rlmLabel ?? null,
    text: (cell.node.innerText || '').slice(0, 4000),
    // the cell's left edge as drawn (an answer cell's tone), e.g. "rgb(76, 175, 80)"
    edge: getComputedStyle(cell.node).borderLeftColor,
    // syntax-highlighted tokens in its editor: CodeMirror's highlight classes (ͼ...);
    // null when the editor is not rendered (scroll to the cell first)
    highlighted: cell.node.querySelector('.cm-content')
      ? cell.node.querySelectorAll('.cm-content .cm-line span[class*="\u037c"]').length
      : null,
  };
};
"""

_JS_CELLS = "() => {" + _JS_PRELUDE + """
  const p = panel();
  return p ? p.content.widgets.map(cellInfo) : null;
}"""

_JS_KERNEL = "() => {" + _JS_PRELUDE + """
  const p = panel();
  if (!p) return null;
  const k = p.sessionContext.session && p.sessionContext.session.kernel;
  return {ready: p.sessionContext.isReady, name: k ? k.name : null,
          status: k ? k.status : null, connection: k ? k.connectionStatus : null,
          dirty: p.context.model.dirty};
}"""

# Records, every 20 ms and on every DOM mutation, each new cell whose model says
# role "step" (or "answer") with the task cell's prompt at that moment.
_JS_WATCH = "(taskId) => {" + _JS_PRELUDE + """
  const p = panel();
  const probe = {events: [], seen: {}};
  window.__rlmProbe = probe;
  const check = () => {
    const cells = p.content.widgets;
    const task = cells.find(c => c.model.id === taskId);
    const taskPrompt = task ? promptOf(task) : null;
    cells.forEach((c, i) => {
      const r = c.model.getMetadata ? c.model.getMetadata('rlm') : null;
      if (!r || probe.seen[c.model.id]) return;
      probe.seen[c.model.id] = true;
      probe.events.push({t: Date.now(), id: c.model.id, index: i, role: r.role,
                         step: r.step ?? null, run_id: r.run_id ?? null,
                         task_cell: r.task_cell ?? null, taskPrompt: taskPrompt,
                         inDom: document.contains(c.node)});
    });
  };
  probe.timer = setInterval(check, 20);
  probe.observer = new MutationObserver(check);
  probe.observer.observe(p.content.node, {childList: true, subtree: true});
  check();
  return true;
}"""


class NotebookPage:
    """One notebook opened in JupyterLab in a Playwright page."""

    def __init__(self, page: Any, lab: JupyterLab, name: str) -> None:
        self.page = page
        self.lab = lab
        self.name = name

    def open(self, timeout: float = 120.0) -> NotebookPage:
        """Open the notebook and wait for its cells and an idle kernel."""
        self.page.goto(self.lab.notebook_url(self.name), wait_until="domcontentloaded")
        self.page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=timeout * 1000)
        self.wait_for(lambda: (self.kernel() or {}).get("status") == "idle", timeout,
                      "an idle kernel")
        return self

    def wait_for(self, predicate: Any, timeout: float, what: str,
                 interval: float = 0.1) -> Any:
        """Poll ``predicate()`` until it is truthy; fail with ``what`` on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}; "
                                     f"kernel={self.kernel()}; cells={self.summary()}")
            self.page.wait_for_timeout(interval * 1000)

    def kernel(self) -> dict[str, Any] | None:
        """The kernel's name, status and connection status, and the model's dirty flag."""
        return self.page.evaluate(_JS_KERNEL)

    def cells(self) -> list[dict[str, Any]]:
        """Every cell: index, id, type, metadata.rlm, prompt, execution count, editor
        MIME type, source, outputs (nbformat dicts), CSS classes, the RLM label of a
        step cell (``data-rlm-label``), rendered text, its left edge's computed colour
        (``edge``, ``rgb(r, g, b)``) and how many syntax-highlighted tokens its editor
        shows (``highlighted``; None when the editor is not rendered)."""
        return self.page.evaluate(_JS_CELLS) or []

    def summary(self) -> list[tuple[Any, ...]]:
        """A short view of the cells for assertion messages."""
        return [(c["index"], c["type"], c["prompt"], (c["rlm"] or {}).get("role"),
                 c["source"][:40]) for c in self.cells()]

    def run_all(self) -> None:
        """Run all cells through the command palette, as a user would."""
        self.page.locator(".jp-Notebook .jp-Cell").first.click()
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Control+Shift+C")
        palette = self.page.locator(".lm-CommandPalette-input")
        palette.wait_for(state="visible", timeout=10_000)
        palette.fill("Run All Cells")
        self.page.locator(".lm-CommandPalette-item", has_text="Run All Cells").first.click()

    def status_text(self) -> str:
        """The status bar's text (it names the kernel's state: "Busy", "Idle")."""
        return self.page.evaluate(
            "() => (document.querySelector('#jp-main-statusbar') || {}).innerText || ''")

    def edit_cell(self, index: int, source: str) -> None:
        """Replace cell ``index``'s source and make it the active cell."""
        self.page.evaluate("([i, src]) => {" + _JS_PRELUDE + """
          const p = panel();
          p.content.widgets[i].model.sharedModel.setSource(src);
          p.content.activeCellIndex = i;
        }""", [index, source])

    def select_cell(self, index: int) -> None:
        """Make cell ``index`` the active (selected) cell."""
        self.page.evaluate("(i) => {" + _JS_PRELUDE + """
          panel().content.activeCellIndex = i;
        }""", index)

    def shutdown_kernel(self, timeout: float = 60.0) -> None:
        """Shut the notebook's kernel down (as "Shut Down Kernel" does) and wait for it."""
        self.page.evaluate("async () => {" + _JS_PRELUDE + """
          await panel().sessionContext.shutdown();
        }""")
        self.wait_for(lambda: (self.kernel() or {}).get("name") is None, timeout,
                      "the kernel to shut down")

    def restart_kernel(self, timeout: float = 60.0) -> bool:
        """Restart the notebook's kernel (as "Restart Kernel" does, without its dialog);
        True once the page shows it idle, False if it does not within ``timeout`` s."""
        self.page.evaluate("async () => {" + _JS_PRELUDE + """
          await panel().sessionContext.restartKernel();
        }""")
        try:
            self.wait_for(lambda: (self.kernel() or {}).get("status") == "idle", timeout,
                          "the restarted kernel")
        except AssertionError:
            return False
        return True

    def interrupt_kernel(self) -> None:
        """Interrupt the notebook's kernel, as the toolbar's stop button does."""
        self.page.evaluate("async () => {" + _JS_PRELUDE + """
          await panel().sessionContext.session.kernel.interrupt();
        }""")

    def toasts(self) -> str:
        """The text of the notification toasts on screen (JupyterLab's Notification
        API shows them with react-toastify), "" when there is none."""
        return self.page.evaluate(
            "() => Array.from(document.querySelectorAll('.Toastify__toast'))"
            ".map(t => t.innerText).join('\\n')")

    def palette(self, command_label: str) -> None:
        """Run a command through the command palette, as a user would."""
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Control+Shift+C")
        box = self.page.locator(".lm-CommandPalette-input")
        box.wait_for(state="visible", timeout=10_000)
        box.fill(command_label)
        self.page.locator(".lm-CommandPalette-item", has_text=command_label).first.click()

    def watch_rlm_cells(self, task_cell_id: str) -> None:
        """Start recording, in the page, when each RLM cell first exists."""
        self.page.evaluate(_JS_WATCH, task_cell_id)

    def rlm_events(self) -> list[dict[str, Any]]:
        """What :meth:`watch_rlm_cells` recorded so far."""
        return self.page.evaluate("() => window.__rlmProbe ? window.__rlmProbe.events : []")

    def save(self, timeout: float = 30.0) -> Path:
        """Save with Ctrl+S; wait until the model is clean and the file has changed."""
        path = self.lab.root / self.name
        before = path.stat().st_mtime_ns
        self.page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Control+s")
        self.wait_for(lambda: path.stat().st_mtime_ns != before
                      and not (self.kernel() or {}).get("dirty"), timeout, "the saved file")
        return path

    def scroll_to(self, index: int) -> None:
        """Scroll the notebook so that cell ``index`` is at the top of the window."""
        self.page.evaluate("(i) => {" + _JS_PRELUDE + """
          const p = panel();
          p.content.scrollToItem(i, 'start');
        }""", index)
        self.page.wait_for_timeout(300)  # the cells scrolled in render

    def screenshot(self, name: str, cell: int | None = None) -> Path:
        """Screenshot into ``SCREENSHOTS/<name>.png``: the whole page, or (``cell``) the
        window scrolled to put that cell at the top."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        out = SCREENSHOTS / f"{name}.png"
        if cell is not None:
            self.scroll_to(cell)
        self.page.screenshot(path=str(out), full_page=cell is None)
        return out


_COUNT = re.compile(r"^\[(\d+)\]:?$")


def prompt_count(prompt: str) -> int | None:
    """The execution count shown in a prompt like ``[3]:`` (None for ``[ ]``/``[*]``)."""
    m = _COUNT.match(prompt.strip())
    return int(m.group(1)) if m else None


def is_running(prompt: str) -> bool:
    """True if a prompt shows ``[*]``."""
    return prompt.strip().startswith("[*]")


def dumps(value: Any) -> str:
    """Compact JSON for messages."""
    return json.dumps(value, default=str)[:2000]
