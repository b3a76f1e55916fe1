"""Fault cases of ``../shared/fault-cases-t5/`` against the isolated executor's channel:
what a value from the worker costs the host to decode.

Model code owns the worker process, so it can forge the data form of any value it hands
the host (a ``FINAL``, a host function's argument, a variable the host reads).  The claim
(``executors/wire.py``): decoding caps bytes, depth and items *before* it allocates, so a
small message cannot make the host allocate gigabytes, crash it, or hang it.  Case y08
(a 224-byte Arrow stream of a 120 M-row ``null`` column) runs end to end in a child
host whose peak memory is watched; its siblings (other Arrow layouts whose size on the
host is not their size on the wire, compressed bodies, nested extension types, numpy
shapes, long decimals) are decoded here directly, each in a child process when a
regression could crash or swell the test process.
"""

from __future__ import annotations

import decimal
import fractions
import json
import os
import subprocess
import sys
import textwrap
import time

import msgpack
import pytest

from rlm_kernel.executors.isolated import LATE_SECONDS
from rlm_kernel.executors.wire import (
    MAX_DEPTH,
    MAX_ITEMS,
    NotData,
    ProtocolError,
    decode_value,
    encode_value,
)
from tests.replies import block
from tests.scripted import scripted_rlm

from .t4_support import ROOT, host_child, report, report_base, run_isolated, summary

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
np = pytest.importorskip("numpy")

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="Linux process limits"),
              pytest.mark.timeout(120)]

ARROW = 18  # the data form's extension type of a pandas frame (wire._ARROW)


def arrow_stream(table, **options) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema,
                           options=pa.ipc.IpcWriteOptions(**options)) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def data_form(stream: bytes) -> bytes:
    """A value's data form holding the Arrow ``stream`` as a pandas frame."""
    return msgpack.packb(msgpack.ExtType(ARROW, stream))


# -- y08: a null column bomb forged as FINAL's data form ------------------------------------------
Y08_ROWS = 30_000_000  # the case has 120 M: 30 M (~500 MB on a host that converts it) is enough
Y08_CODE = r'''
import sys, msgpack, pyarrow as pa
W = sys.modules['rlm_kernel.executors.worker']
t = pa.table({'a': pa.nulls(%d)})
sink = pa.BufferOutputStream()
with pa.ipc.new_stream(sink, t.schema) as w:
    w.write_table(t)
blob = sink.getvalue().to_pybytes()
print('arrow bytes', len(blob))
forged = msgpack.packb(msgpack.ExtType(18, blob))
orig = W.encode_value
class Bomb: pass
def enc(v, **k):
    return forged if isinstance(v, Bomb) else orig(v, **k)
W.encode_value = enc
FINAL(Bomb())
'''.replace("%d", str(Y08_ROWS))


def y08_host():
    report_base()
    res, lm, took = run_isolated(Y08_CODE, max_seconds=30, step_timeout=20)
    report(**summary(res, lm, took))


def test_a_tiny_arrow_stream_cannot_make_the_host_allocate_gigabytes():
    """Case y08_arrow_null_column_bomb: model code swaps the worker's encoder so that its
    ``FINAL`` value's data form is a ~220-byte Arrow stream of a 30 M-row column of type
    ``null`` (no buffers: 8 bytes a row only once converted).  The host counts the rows
    the stream declares against the item cap before converting anything: its peak
    resident memory stays within 100 MB of what it was, and the forged value is refused:
    the answer the run records is its description (a malformed value), not a frame."""
    child = host_child(f"{__name__}:y08_host", 90)
    res = child.result
    assert child.finished and res is not None and "raised" not in res, child.describe()
    assert child.base_kb is not None, child.describe()
    grew = (child.peak_kb - child.base_kb) // 1024
    assert grew < 100, f"host peak RSS grew by {grew} MB; {child.describe()}"
    assert "arrow bytes" in res["outputs"][0], res
    assert res["stopped_by"] == "final" and "malformed" in res["answer"], res


# -- siblings: Arrow layouts whose size on the host is not their size on the wire ----------------
def _streams() -> dict[str, bytes]:
    n = 3_000_000  # 3 x the item cap: each is refused by its count alone
    return {
        "null column": arrow_stream(pa.table({"a": pa.nulls(n)})),
        "list of nulls": arrow_stream(pa.table({"a": pa.ListArray.from_arrays(
            [0, n], pa.nulls(n))})),
        "fixed-size list of nulls": arrow_stream(pa.table({"a": pa.FixedSizeListArray.from_arrays(
            pa.nulls(n), n)})),
        "struct of null fields": arrow_stream(pa.table({"a": pa.StructArray.from_arrays(
            [pa.nulls(n // 3)] * 3, names=["x", "y", "z"])})),
        "many batches of nulls": arrow_stream(pa.Table.from_batches(
            [pa.record_batch({"a": pa.nulls(n // 30)})] * 30)),
        "dictionary of one long value": arrow_stream(pa.table({"a": pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(n, dtype=np.int8)), pa.array(["x" * 1000]))})),
        "run-end encoded": arrow_stream(pa.table({"a": pa.RunEndEncodedArray.from_arrays(
            [n], ["x" * 1000])})),
        "zero-row columns": arrow_stream(pa.table({f"c{i}": pa.nulls(0) for i in range(20_000)})),
    }


@pytest.mark.parametrize("kind", list(_streams()))
def test_an_arrow_stream_is_charged_its_declared_items_before_it_is_converted(kind):
    """Each stream declares more than :data:`MAX_ITEMS` rows, cells, nested values or
    (zero-row) columns in at most a few megabytes: it is refused before conversion, and decoding
    it costs the host next to nothing (checked in a child process: a regression would
    allocate gigabytes there, not here)."""
    stream = _streams()[kind]
    assert len(stream) < 4_000_000
    found = _decode_in_child(data_form(stream))
    assert found["refused"] and "more items than the limit" in found["refused"], found
    assert found["grew_mb"] < 100, found


@pytest.mark.parametrize("kind, arrays", [
    ("string view", lambda: pa.array(["x" * 100] * 3, pa.string_view())),
    ("list view", lambda: pa.ListViewArray.from_arrays([0, 0], [2, 2], pa.array([1, 2]))),
    ("union", lambda: pa.UnionArray.from_sparse(pa.array([0, 1], pa.int8()),
                                                [pa.array([1, 2]), pa.array(["a", "b"])])),
    ("run-end encoded", lambda: pa.RunEndEncodedArray.from_arrays([2], [7])),
    ("dictionary in a list", lambda: pa.array([["a"], ["a", "a"]],
                                              pa.list_(pa.dictionary(pa.int8(), pa.string())))),
])
def test_arrow_layouts_no_frame_is_sent_as_are_refused(kind, arrays):
    """Views, unions, run-end encoding and dictionaries inside nested values let many
    rows share one value that conversion copies out for each: the encoder never sends
    them (``Table.from_pandas`` does not make them), so the host refuses them by type,
    however small."""
    stream = arrow_stream(pa.table({"a": arrays()}))
    with pytest.raises(ProtocolError, match="Arrow"):
        decode_value(data_form(stream))


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_a_compressed_arrow_stream_is_refused_before_it_inflates(codec):
    """A compressed body inflates when it is read (zeros: 400 MB from a few kB here):
    the host reads the messages' metadata first and refuses compression before any
    body is read (in a child process, so a regression inflates there)."""
    stream = arrow_stream(pa.table({"a": np.zeros(50_000_000, dtype=np.int64)}),
                          compression=codec)
    assert len(stream) < 2_000_000
    found = _decode_in_child(data_form(stream))
    assert found["refused"] and "compressed" in found["refused"], found
    assert found["grew_mb"] < 100, found


def test_frames_a_dataframe_is_sent_as_still_cross():
    """What the refusals keep: the frames pandas users make cross with their dtypes
    (categoricals, periods, nullable ints, datetimes with a zone, nested cells)."""
    frame = pd.DataFrame({
        "cat": pd.Categorical(["a", "b", "a"]), "n": pd.array([1, None, 3], dtype="Int64"),
        "when": pd.date_range("2026-01-01", periods=3, tz="Europe/Paris"),
        "period": pd.period_range("2026-01", periods=3, freq="M"),
        "cell": [{"k": 1}, {"k": 2}, None], "text": ["x", None, "z"]})
    back = decode_value(encode_value(frame))
    assert list(back.dtypes) == list(frame.dtypes)
    assert back.drop(columns=["cell"]).equals(frame.drop(columns=["cell"]))
    assert back["cell"].tolist() == frame["cell"].tolist()


def test_the_encoder_counts_a_frames_nested_values_as_the_host_does():
    """A frame of 1,000 rows whose cells are lists of 2,000 items is 1,000 items to
    pandas and 2 million to the host's count: the worker's encoder refuses it with the
    reason (the host gets a description), never a frame the host would refuse."""
    frame = pd.DataFrame({"cells": [list(range(2000))] * 1000})
    with pytest.raises(NotData, match="item limit"):
        encode_value(frame)


def test_forged_arrow_streams_are_refused_not_crashes():
    """20,000 random corruptions of a valid frame's stream (1-4 bytes each, metadata and
    bodies alike): each decodes to a frame or is refused as a :class:`ProtocolError`,
    never another exception (in a child process: a crash of the reader would end it)."""
    frame = pd.DataFrame({"s": ["ab", "c", None], "i": [1, 2, 3],
                          "c": pd.Categorical(["x", "y", "x"]), "l": [[1], [2, 3], []],
                          "d": [{"k": 1}, {"k": 2}, None]})
    stream = msgpack.unpackb(encode_value(frame), ext_hook=lambda code, data: data)
    script = textwrap.dedent(f"""
        import random, msgpack
        from rlm_kernel.executors.wire import decode_value, ProtocolError
        stream, rng, counts = {stream!r}, random.Random(35), {{"ok": 0, "refused": 0}}
        for _ in range(20000):
            b = bytearray(stream)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            try:
                decode_value(msgpack.packb(msgpack.ExtType({ARROW}, bytes(b))))
                counts["ok"] += 1
            except ProtocolError:
                counts["refused"] += 1
        print(counts)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=110)
    assert done.returncode == 0, done.stderr[-2000:]
    counts = eval(done.stdout.strip())  # noqa: S307 - our own child's dict of two ints
    assert counts["ok"] + counts["refused"] == 20000 and counts["refused"] > 10000, counts


# -- siblings elsewhere in the data form --------------------------------------------------------
def _nested_exts(depth: int) -> bytes:
    blob = msgpack.packb([1])
    for _ in range(depth):
        blob = msgpack.packb(msgpack.ExtType(1, blob))  # a tuple in a tuple in ...
    return blob


@pytest.mark.parametrize("depth", [500, 5000])
def test_extension_types_nested_deep_are_refused_not_a_crash(depth):
    """Extension types one inside the other (tuples, here) each start a new msgpack
    parse with its ~40 KB parse stack on the C stack: 500 of them crashed the host with
    a segmentation fault.  Past :data:`MAX_DEPTH` they are refused, in the main thread
    and in a thread with a small stack (a child process: a crash would end it)."""
    script = textwrap.dedent("""
        import sys, threading
        from rlm_kernel.executors.wire import decode_value, ProtocolError
        blob = sys.stdin.buffer.read()
        def go():
            try:
                decode_value(blob)
                print("decoded")
            except ProtocolError as exc:
                print("refused:", exc)
        go()
        threading.stack_size(512 << 10)
        t = threading.Thread(target=go)
        t.start()
        t.join()
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, input=_nested_exts(depth),
                          capture_output=True, timeout=60)
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-1000:]!r}"
    lines = done.stdout.decode().splitlines()
    assert len(lines) == 2 and all(f"deeper than {MAX_DEPTH}" in ln for ln in lines), lines


def test_tuples_as_deep_as_the_encoder_allows_still_cross():
    value: object = 1
    for _ in range(MAX_DEPTH):
        value = (value,)
    assert decode_value(encode_value(value)) == value


@pytest.mark.parametrize("dtype, shape, data, why", [
    ("|b1", [2 * MAX_ITEMS], b"\x00" * 2 * MAX_ITEMS, "more items than the limit"),
    ("<i8", [-1, -1], b"\x00" * 8, "negative shape"),
    ("|V8", [1], b"\x00" * 8, "is not data"),
    ("<M8[ns]", [1], b"\x00" * 8, "is not data"),
    ("(2,)<i8", [1], b"\x00" * 16, "is not data"),
    ("<i8", [3], b"\x00" * 8, "do not match"),
])
def test_numpy_arrays_are_checked_before_they_are_built(dtype, shape, data, why):
    """A numpy array's elements count against the item cap (2 million booleans are 2
    MB on the wire, 2 million items to whoever turns them into a list); negative shapes,
    void, datetime and sub-array dtypes and bytes that do not match the shape are refused."""
    forged = msgpack.packb(msgpack.ExtType(14, msgpack.packb([dtype, shape, data])))
    with pytest.raises(ProtocolError, match=why):
        decode_value(forged)


@pytest.mark.parametrize("code, tree", [
    (10, "1e999999999"),
    (10, "1" * 20_000),
    (11, ["1" * 20_000, "3"]),
])
def test_numbers_past_the_digit_cap_are_refused(code, tree):
    """A ``Decimal`` of a billion integer digits is 11 characters on the wire and an
    int of 415 MB once anything converts it (``int()``, a typed answer's validation); a
    fraction of 20,000 digits was cut silently.  Both are refused past 10,000 digits,
    as an int is; the worker's encoder refuses them likewise."""
    with pytest.raises(ProtocolError, match="too many digits"):
        decode_value(msgpack.packb(msgpack.ExtType(code, msgpack.packb(tree))))
    with pytest.raises(NotData):
        encode_value(decimal.Decimal("1e999999999"))
    assert decode_value(encode_value(decimal.Decimal("1e-999999999"))) == \
        decimal.Decimal("1e-999999999")
    assert decode_value(encode_value(fractions.Fraction(10**4000, 3))) == \
        fractions.Fraction(10**4000, 3)


def test_an_array_header_announcing_billions_is_refused_before_its_items():
    """A msgpack array header announcing 2**31 items in a 20-byte value is refused by
    the item cap before any list is built."""
    forged = b"\xdd\x80\x00\x00\x00" + b"\xc0" * 16
    with pytest.raises(ProtocolError):
        decode_value(forged)


# -- helpers --------------------------------------------------------------------------------------
def _decode_in_child(data: bytes) -> dict:
    """Decode ``data`` in a child process: ``{"refused": reason or None, "grew_mb": peak
    resident memory the decoding added}``."""
    script = textwrap.dedent("""
        import json, resource, sys
        from rlm_kernel.executors.wire import decode_value, ProtocolError
        data = sys.stdin.buffer.read()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            decode_value(data)
            refused = None
        except ProtocolError as exc:
            refused = str(exc)
        grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        print(json.dumps({"refused": refused, "grew_mb": grew}))
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, input=data,
                          capture_output=True, timeout=100)
    assert done.returncode == 0, f"rc {done.returncode}: {done.stderr[-1000:]!r}"
    return json.loads(done.stdout.decode().strip().splitlines()[-1])


# -- z15: the host imports no module model code wrote in the working folder -----------------------
Z15_PLANT = r'''
import os, numpy, pandas, pyarrow  # the worker's own, before the plants
for name in ("pyarrow", "numpy", "pandas", "colorsys", "z15_only_here"):
    with open(name + ".py", "w") as f:
        f.write("import os\n"
                "open(%r, 'a').write(f'{__name__} {os.getpid()}\\n')\n" % MARKER)
print("planted", sorted(n for n in os.listdir(".") if n.endswith(".py")))
'''
Z15_APP = r'''
import json, os, sys
from tests.faults.t4_support import run_isolated, summary
FOLDER = os.path.dirname(os.path.abspath(__file__))
plant = os.environ["Z15_PLANT"].replace("MARKER", repr(os.environ["Z15_MARKER"]))
final = ("import pandas as pd, numpy as np\n"
         "FINAL({'frame': pd.DataFrame({'a': [1, 2]}), 'array': np.arange(3)})")
res, lm, took = run_isolated(plant, final, workdir=FOLDER, step_timeout=30, max_seconds=120)
value = res.answer_value
try:
    kinds = {k: type(v).__module__.split(".")[0] + "." + type(v).__name__
             for k, v in value.items()}
    total = int(value["frame"]["a"].sum() + value["array"].sum())
except Exception as exc:  # a value the host could not decode
    kinds, total = repr(exc), None
try:
    import z15_only_here  # the run is over: the working folder's own modules import
    after = "imported"
except ImportError as exc:
    after = repr(exc)
import colorsys  # first imported after the run: still the installed one
print("Z15 " + json.dumps({**summary(res, lm, took), "pid": os.getpid(), "kinds": kinds,
                           "sum": total, "after": after, "colorsys": colorsys.__file__,
                           "guard_left": [type(f).__name__ for f in sys.meta_path]}))
'''


def test_z15_the_host_imports_no_module_model_code_wrote_in_the_working_folder(tmp_path):
    """Case z15_host_imports_from_workdir: the user's program lives in the folder it gives
    as the working folder (``python app.py`` puts that folder first on the host's
    ``sys.path``); model code writes ``pyarrow.py``, ``numpy.py`` and ``pandas.py`` there,
    then ``FINAL``s a pandas frame and a numpy array, which the host decodes with its
    first ``import pyarrow`` / ``numpy`` after model code could write the folder.  None
    of model code's modules runs in the host: the marker they write is never written by
    the host's pid, and the answer is a real frame and array (decoded by the installed
    modules).  Once the run is over (its executor closed) a module found only in the
    folder imports (the user's own), while ``colorsys.py`` model code left there is
    still passed over for the installed one (what a library imports after the run)."""
    project = tmp_path / "project"
    project.mkdir()
    marker = tmp_path / "marker"
    app = project / "app.py"
    app.write_text(Z15_APP)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "Z15_PLANT": Z15_PLANT, "Z15_MARKER": str(marker)}
    done = subprocess.run([sys.executable, str(app)], cwd=project, env=env,
                          capture_output=True, text=True, timeout=150)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("Z15 ")]
    assert done.returncode == 0 and lines, (done.stdout[-2000:], done.stderr[-3000:])
    res = json.loads(lines[-1][4:])
    assert "planted" in res["outputs"][0], res
    ran = marker.read_text().split() if marker.exists() else []
    host_ran = {ran[i] for i in range(0, len(ran), 2) if ran[i + 1] == str(res["pid"])}
    assert host_ran <= {"z15_only_here"}, f"the host ran model code's {host_ran}"
    assert res["colorsys"] == os.path.join(os.path.dirname(os.__file__), "colorsys.py"), res
    assert res["stopped_by"] == "final", res
    assert res["kinds"] == {"frame": "pandas.DataFrame", "array": "numpy.ndarray"}, res
    assert res["sum"] == 3 + 3, res
    assert res["after"] == "imported", res  # after close: the user's own module


Z15_GUARD = r'''
import importlib, json, os, sys
from rlm_kernel.executors.import_guard import FolderImportRefused, guard_folder
folder, outside = sys.argv[1], sys.argv[2]
found = {}
sys.path.insert(0, os.path.join(folder, "link"))  # a link in the folder, leading out
sys.path.insert(0, "")                             # the current folder, as in Jupyter
os.chdir(folder)
release = guard_folder(folder)
for name in ("csv", "z15_only_here", "z15_out", "z15ns.inner", "z15pkg.sub"):
    try:
        module = importlib.import_module(name)
        found[name] = os.path.realpath(module.__file__) if getattr(module, "__file__", None) \
            else "namespace"
    except FolderImportRefused as exc:
        found[name] = "refused: " + str(exc)
release()
release()  # idempotent
import z15_only_here, colorsys
found["after"] = os.path.realpath(z15_only_here.__file__)
found["shadow after"] = os.path.realpath(colorsys.__file__)
release = guard_folder(folder)  # guarded again: refused again
try:
    import z15_again
    found["again"] = "imported"
except FolderImportRefused:
    found["again"] = "refused"
release()
print(json.dumps(found))
'''


def test_z15_a_guarded_folder_is_passed_over_and_what_is_only_there_refused(tmp_path):
    """The guard itself (:mod:`rlm_kernel.executors.import_guard`), in a child process
    whose ``sys.path`` starts with ``''`` (the working folder is its current folder) and a
    symbolic link in the folder that leads out of it: a module that shadows the
    installed one (``csv.py``) is passed over for the installed one; a module found only
    in the folder, or only through the link, and a package's submodule found only there
    (``z15pkg.sub``, with ``z15pkg`` imported before the folder was guarded) are refused
    with an ImportError that names the folder and what to do; a namespace package's
    portion in the folder is not joined.  Released (twice: once counts), the folder's
    own module imports while one that shadows an installed module (``colorsys.py``) is
    still passed over; guarded again, the folder's own modules are refused again."""
    folder, out = tmp_path / "work", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    for name in ("csv", "colorsys", "z15_only_here", "z15_again"):
        (folder / f"{name}.py").write_text("RAN = True\n")
    (out / "z15_out.py").write_text("RAN = True\n")
    (folder / "link").symlink_to(out)
    (folder / "z15ns").mkdir()
    (folder / "z15ns" / "inner.py").write_text("RAN = True\n")
    (folder / "z15pkg").mkdir()
    (folder / "z15pkg" / "__init__.py").write_text("")
    (folder / "z15pkg" / "sub.py").write_text("RAN = True\n")
    script = "import sys, os; sys.path.insert(0, sys.argv[1]); import z15pkg; del sys.path[0]\n" \
        + Z15_GUARD
    done = subprocess.run([sys.executable, "-c", script, str(folder), str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["csv"] == os.path.join(os.path.dirname(os.path.realpath(os.__file__)), "csv.py"), found
    for name in ("z15_only_here", "z15_out", "z15ns.inner", "z15pkg.sub"):
        assert found[name].startswith("refused: "), (name, found)
        assert str(folder) in found[name] and "model code" in found[name], found[name]
    assert found["after"] == str(folder / "z15_only_here.py"), found
    stdlib = os.path.dirname(os.path.realpath(os.__file__))
    assert found["shadow after"] == os.path.join(stdlib, "colorsys.py"), found
    assert found["again"] == "refused", found


# -- z10: a worker slow (never silent) after the last step -----------------------------------------
Z10_CODE = r'''
import time, rlm_kernel.executors.worker as w
for i in range(12):
    globals()[f'v{i}'] = list(range(i))
orig = w.Worker.handle
def slow(self, message):
    time.sleep(2.8)
    return orig(self, message)
w.Worker.handle = slow
FINAL('done')
'''


def test_z10_a_worker_slow_to_answer_every_request_does_not_hold_the_run(monkeypatch):
    """Case z10_slow_but_never_silent_worker: model code makes the worker answer every
    request of the host 2.8 s late (under the 3 s a late request was given each), binds
    12 names and calls ``FINAL`` with a literal, so that the host reads the namespace
    after the step (the grounding check, the variables the run made).  Every wait on the
    worker after the run's deadline ends ``LATE_SECONDS`` past it, all requests
    together: the run (``max_seconds=6``) ends within 6 + 3 s and a little, keeps its
    answer and ``stopped_by`` final, and the variables not read in time say so."""
    rlm, _ = scripted_rlm([block(Z10_CODE), block("FINAL('again')")],
                          executor="isolated", max_seconds=6, step_timeout=3)
    started = time.monotonic()
    res = rlm.run("question", context="some data")
    took = time.monotonic() - started
    assert res.answer == "done" and res.stopped_by == "final", (res.answer, res.error)
    assert took < 6 + LATE_SECONDS + 2, took
    listed = {v.name: v.preview for v in res.new_variables}
    assert all(f"v{i}" in listed for i in range(12)), listed
    late = [n for n, preview in listed.items() if "not read, the run's time was up" in preview]
    assert late, listed  # 2.8 s a request: the last ones were not read in time


# -- z20: one object under many names --------------------------------------------------------------
Z20_CODE = ("import os\nblob = os.urandom(25 << 20)\nfor i in range(40):\n"
            "    globals()[f'x{i}'] = blob\nprint(len(blob))\n")


def z20_host():
    final = os.environ["Z20_FINAL"]
    report_base()
    res, lm, took = run_isolated(Z20_CODE + final, max_seconds=120, step_timeout=60,
                                 ground_answer=True, memory_limit=1 << 30)
    report(**summary(res, lm, took),
           variables=[[v.name, v.type_name, v.total_length] for v in res.new_variables])


@pytest.mark.parametrize("final", ["FINAL('size ' + str(len(blob)))", "FINAL('26214400')"],
                         ids=["computed", "literal (grounded over the namespace)"])
def test_z20_one_object_under_many_names_costs_the_host_no_copy_per_name(final):
    """Case z20_alias_names_host_copies: model code binds one 25 MB object under 40
    names in the sandbox and calls ``FINAL``; after the step the host lists the
    variables the run made and, for a literal answer, looks for it in the namespace.
    The variables are described in the worker (no value crosses for it), and the host
    keeps at most ``COPIES_BYTES`` of decoded copies, reading the namespace one value at
    a time: its peak resident memory grows by less than 250 MB (it grew by 1,076 MB: a
    copy per name), and the 40 names are listed with their type and length."""
    child = host_child(f"{__name__}:z20_host", 240, env={"Z20_FINAL": final})
    res = child.result
    assert child.finished and res is not None and "raised" not in res, child.describe()
    assert res["stopped_by"] == "final", res
    grew = (child.peak_kb - child.base_kb) // 1024
    assert grew < 250, f"host peak RSS grew by {grew} MB; {child.describe()}"
    listed = {name: (kind, length) for name, kind, length in res["variables"]}
    assert all(listed.get(f"x{i}") == ("bytes", 25 << 20) for i in range(40)), listed


def test_z20_variables_are_described_where_they_live():
    """The variables' metadata is made in the worker (``describe_variables``): a data
    variable's type, length and preview (a 1 MB bytes value: its byte count, nothing
    copied), modules, functions, private names and the names skipped left out, a value
    whose ``__repr__`` sleeps described as ``<Slow object>`` within its time limit; and
    ``variable_ids`` tells a name rebound from one left alone, without reading them."""
    from rlm_kernel.executors import IsolatedExecutor, variable_ids
    from rlm_kernel.executors.worker import DESCRIBE_SECONDS

    with IsolatedExecutor() as ex:
        ex.execute("import os, json\nclass Slow:\n    def __repr__(self):\n"
                   "        import time; time.sleep(30)\nslow = Slow()\n"
                   "big = b'x' * (1 << 20)\nkept = [1, 2]\nskipped = 'no'\n_private = 1\n"
                   "def helper():\n    pass\n", timeout=10)
        before = variable_ids(ex)
        started = time.monotonic()
        described = {v.name: v for v in ex.describe_variables(skip=["skipped"])}
        assert time.monotonic() - started < DESCRIBE_SECONDS + 3
        assert set(described) == {"slow", "big", "kept"}, described
        assert described["slow"].preview == "<Slow object>"
        assert (described["big"].total_length, described["big"].length_unit) == (1 << 20,
                                                                                "bytes")
        assert described["kept"].type_name == "list" and "1" in described["kept"].preview
        assert not ex.namespace._copies  # nothing was copied to the host for it
        ex.execute("big = b'y'\nkept = kept", timeout=10)
        after = variable_ids(ex)
        assert after["kept"] == before["kept"] and after["big"] != before["big"]
