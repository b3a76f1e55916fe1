"""The ``rlm`` kernelspec: the protocol conformance suite, the installer, the listing.

The conformance part is ``jupyter_kernel_test`` (the suite Jupyter kernels are
checked with), run against a real ``rlm`` kernel started by jupyter_client from
the installed kernelspec.  No model is called.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import jupyter_kernel_test as jkt
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import start_new_kernel

from rlm_kernel.jupyter.install import DISPLAY_NAME, KERNEL_NAME, LOGOS, SPEC_DIR, kernel_dict

ROOT = Path(__file__).resolve().parents[2]


class RLMKernelTests(jkt.KernelTests):
    """``jupyter_kernel_test`` against the ``rlm`` kernel: it must behave as ``python3``."""

    kernel_name = KERNEL_NAME
    language_name = "python"
    file_extension = ".py"

    code_hello_world = "print('hello, world')"
    code_stderr = "import sys; print('oops', file=sys.stderr)"

    completion_samples = [
        {"text": "zi", "matches": {"zip"}},
    ]
    complete_code_samples = ["1", "print('hello, world')", "def f(x):\n  return x*2\n\n\n"]
    incomplete_code_samples = ["print('''hello", "def f(x):\n  x*2"]
    invalid_code_samples = ["import = 7q", "x = (]"]

    code_page_something = "len?"
    code_generate_error = "raise ValueError('rlm kernel test error')"

    code_execute_result = [
        {"code": "6*7", "result": "42"},
        {"code": "[n*n for n in range(1, 4)]", "result": "[1, 4, 9]"},
        {"code": "from IPython.display import HTML\nHTML('<b>rlm</b>')", "mime": "text/html"},
    ]
    code_display_data = [
        {"code": "from IPython.display import HTML, display\ndisplay(HTML('<b>rlm</b>'))",
         "mime": "text/html"},
        {"code": "from IPython.display import Math, display\ndisplay(Math(r'\\frac{1}{2}'))",
         "mime": "text/latex"},
    ]
    # Matches "6*7" only; history lives in a fresh IPYTHONDIR (see setUpClass), so the
    # "unique" search cannot be confused by other sessions' history.
    code_history_pattern = "6?7*"
    # IPython answers a range request over the running session with session number 0
    # (python3 fails the suite's check for that reason); RLMKernel.do_history reports
    # the real number, so all three operations are checked.
    supported_history_operations = ("tail", "range", "search")

    code_inspect_sample = "zip"
    code_clear_output = "from IPython.display import clear_output\nclear_output()"

    @classmethod
    def setUpClass(cls) -> None:
        """Start the kernel with its own IPython profile dir (history, no startup files)."""
        import os

        cls._ipython_dir = tempfile.TemporaryDirectory(prefix="rlm-kernel-test-ipython-")
        env = dict(os.environ, IPYTHONDIR=cls._ipython_dir.name)
        cls.km, cls.kc = start_new_kernel(kernel_name=cls.kernel_name, startup_timeout=60,
                                          env=env)

    @classmethod
    def tearDownClass(cls) -> None:
        """Stop the kernel and drop its profile dir."""
        super().tearDownClass()
        cls._ipython_dir.cleanup()

    def test_history_range_current_session(self) -> None:
        """A range request with session 0 (IPython's "current session") returns the cells
        run, in order, numbered with the real session."""
        codes = [s["code"] for s in self.code_execute_result]
        tail = self.history_helper(codes, output=False, raw=True, hist_access_type="tail",
                                   n=len(codes))
        start = tail["content"]["history"][0][1]
        reply = self.history_helper([], output=False, raw=True, hist_access_type="range",
                                    session=0, start=start, stop=start + len(codes))
        history = reply["content"]["history"]
        assert [h[2] for h in history] == codes
        assert [h[1] for h in history] == list(range(start, start + len(codes)))
        assert {h[0] for h in history} == {tail["content"]["history"][0][0]}

    def test_kernel_is_rlm(self) -> None:
        """kernel_info names the RLM implementation, not plain ipykernel."""
        self.flush_channels()
        self.kc.kernel_info()
        reply = self.kc.get_shell_msg(timeout=jkt.TIMEOUT)
        assert reply["content"]["implementation"] == "rlm_kernel"
        assert reply["content"]["language_info"]["name"] == "python"

    def test_startup_does_not_import_litellm(self) -> None:
        """Kernel start-up stays cheap: litellm (~4 s to import) loads on first use only, or
        in the warm start's background thread after start-up (off here: tests/conftest.py)."""
        self.flush_channels()
        reply, outputs = self.execute_helper(
            "import sys as _s\nprint('litellm' in _s.modules, _s.prefix)")
        assert reply["content"]["status"] == "ok"
        text = "".join(m["content"]["text"] for m in outputs if m["msg_type"] == "stream")
        imported, prefix = text.split()
        assert imported == "False"
        assert Path(prefix) == Path(sys.prefix)  # the kernel runs in this environment


def _png_size(path: Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk (after checking the signature)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_shipped_kernelspec_is_complete_and_matches_installer():
    """rlm_kernel/jupyter/resources: kernel.json as specified, and the three logos at their sizes."""
    spec = json.loads((SPEC_DIR / "kernel.json").read_text())
    assert spec == kernel_dict(executable="python")
    assert spec["argv"] == ["python", "-m", "rlm_kernel", "-f", "{connection_file}"]
    assert spec["display_name"] == "RLM (Python)"
    assert spec["interrupt_mode"] == "signal"
    assert spec["metadata"] == {"debugger": False}
    assert sorted(p.name for p in SPEC_DIR.iterdir()) == sorted(["kernel.json", *LOGOS])
    assert _png_size(SPEC_DIR / "logo-32x32.png") == (32, 32)
    assert _png_size(SPEC_DIR / "logo-64x64.png") == (64, 64)
    assert (SPEC_DIR / "logo-svg.svg").read_text().lstrip().startswith("<svg")


def test_pyproject_ships_the_kernelspec_as_shared_data():
    """The wheel maps the package's kernelspec resources to share/jupyter/kernels/rlm (pip install registers it)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    shared = project["tool"]["hatch"]["build"]["targets"]["wheel"]["shared-data"]
    assert shared["rlm_kernel/jupyter/resources"] == "share/jupyter/kernels/rlm"


def _install(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``python -m rlm_kernel install --prefix tmp_path ARGS``."""
    return subprocess.run(
        [sys.executable, "-m", "rlm_kernel", "install", "--prefix", str(tmp_path), *args],
        capture_output=True, text=True, timeout=120, check=False)


def test_install_prefix_writes_kernelspec_with_this_python(tmp_path):
    """``install --prefix P --name rlm-test``: a valid spec whose argv runs this interpreter."""
    proc = _install(tmp_path, "--name", "rlm-test")
    assert proc.returncode == 0, proc.stderr
    dest = tmp_path / "share" / "jupyter" / "kernels" / "rlm-test"
    assert f"Installed kernelspec rlm-test in {dest}" in proc.stdout
    spec = json.loads((dest / "kernel.json").read_text())
    assert spec["argv"] == [sys.executable, "-m", "rlm_kernel", "-f", "{connection_file}"]
    assert spec["language"] == "python"
    assert spec["interrupt_mode"] == "signal"
    assert spec["metadata"] == {"debugger": False}
    assert spec["display_name"] == "rlm-test"  # another name: shown as itself, as ipykernel does
    for logo in LOGOS:
        assert (dest / logo).read_bytes() == (SPEC_DIR / logo).read_bytes()

    ksm = KernelSpecManager(kernel_dirs=[str(dest.parent)])
    found = ksm.get_kernel_spec("rlm-test")
    assert found.argv[0] == sys.executable
    assert found.display_name == "rlm-test"
    assert found.interrupt_mode == "signal"


def test_install_display_name_and_default_name(tmp_path):
    """``--display-name`` is written as given; the default name is ``rlm``."""
    proc = _install(tmp_path, "--display-name", "RLM (test env)")
    assert proc.returncode == 0, proc.stderr
    spec = json.loads(
        (tmp_path / "share" / "jupyter" / "kernels" / "rlm" / "kernel.json").read_text())
    assert spec["display_name"] == "RLM (test env)"

    proc = _install(tmp_path, "--name", "rlm-other")
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in (tmp_path / "share" / "jupyter" / "kernels").iterdir()} == {
        "rlm", "rlm-other"}


def test_install_rejects_two_locations(tmp_path):
    """``--user`` and ``--prefix`` together are an error, as with ipykernel."""
    proc = _install(tmp_path, "--user")
    assert proc.returncode == 2
    assert "not allowed with argument" in proc.stderr


def test_installed_spec_starts_a_kernel(tmp_path):
    """A spec written by the installer (absolute interpreter in argv) starts a working kernel."""
    assert _install(tmp_path, "--name", "rlm-test").returncode == 0
    from jupyter_client.manager import KernelManager

    ksm = KernelSpecManager(kernel_dirs=[str(tmp_path / "share" / "jupyter" / "kernels")])
    km = KernelManager(kernel_name="rlm-test", kernel_spec_manager=ksm)
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        reply = kc.execute_interactive("answer = 6 * 7", timeout=30)
        assert reply["content"]["status"] == "ok"
        kc.kernel_info()
        info = kc.get_shell_msg(timeout=30)
        assert info["content"]["implementation"] == "rlm_kernel"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_kernelspec_list_shows_rlm():
    """``jupyter kernelspec list``: ``rlm``, shown as "RLM (Python)", next to ``python3``."""
    specs = KernelSpecManager().get_all_specs()
    assert KERNEL_NAME in specs, sorted(specs)
    spec = specs[KERNEL_NAME]["spec"]
    assert spec["display_name"] == DISPLAY_NAME
    assert spec["language"] == "python"
    assert spec["argv"][1:] == ["-m", "rlm_kernel", "-f", "{connection_file}"]
    assert Path(specs[KERNEL_NAME]["resource_dir"], "logo-64x64.png").is_file()


def test_jupyter_kernelspec_list_json_command():
    """The same through the ``jupyter kernelspec list --json`` command line."""
    proc = subprocess.run([sys.executable, "-m", "jupyter", "kernelspec", "list", "--json"],
                          capture_output=True, text=True, timeout=120, check=True)
    specs = json.loads(proc.stdout)["kernelspecs"]
    assert specs[KERNEL_NAME]["spec"]["display_name"] == DISPLAY_NAME


def test_main_help_is_cheap():
    """``python -m rlm_kernel install --help`` works and imports neither litellm nor the kernel."""
    code = ("import runpy, sys\n"
            "sys.argv = ['rlm_kernel', 'install', '--help']\n"
            "try:\n    runpy.run_module('rlm_kernel', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('MODS', 'litellm' in sys.modules, 'ipykernel' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert "--sys-prefix" in proc.stdout
    assert "MODS False False" in proc.stdout
