"""Parsed views: records as dicts, Python code as an outline, forgiving filters."""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import pytest

from rlm_kernel.context.documents import search_lines
from rlm_kernel.context.structure import code_outline, detect_views, parse_records, sample_fields

STDLIB = Path(sysconfig.get_paths()["stdlib"])
RECORDS = ("Package: alpha\nVersion: 1.0\nInstalled-Size: 10\nDescription: first line\n"
           " continued here\n\nPackage: beta\nVersion: 2.1\nInstalled-Size: 300\n\n"
           "Package: gamma\nVersion: 0.3\nInstalled-Size: 7\n")


def test_records_parse_with_continuation_lines_and_filter_forgivingly():
    recs = parse_records(RECORDS)
    assert [r["Package"] for r in recs] == ["alpha", "beta", "gamma"]
    assert recs[0]["Description"] == "first line\ncontinued here"
    assert max(recs, key=lambda r: r["Installed-Size"])["Package"] == "beta"  # ints, not str
    assert recs[0]["Version"] == "1.0"
    assert parse_records(RECORDS, package="BETA") == [recs[1]]
    assert parse_records(RECORDS, Installed_Size=7)[0]["Package"] == "gamma"
    assert parse_records(RECORDS, Nope="x") == []
    as_list = [b for b in RECORDS.split("\n\n")]
    assert parse_records(as_list) == recs
    assert parse_records({"a": {"Package": "x"}}) == [{"Package": "x"}]
    assert repr(recs).startswith("3 records:\n{'Package': 'alpha'")


def test_a_hit_in_a_record_reads_the_records_fields():
    hit = search_lines(RECORDS, "Version: 2.1")[0]
    assert hit["doc"] == "beta" and hit["Installed-Size"] == 300
    assert hit["installed_size"] == 300 and hit["Version"] == "2.1"
    with pytest.raises(KeyError, match="the fields are 'Package'"):
        hit["Maintainer"]
    code_hit = search_lines({"a.py": "x = 1\n"}, "x")[0]
    with pytest.raises(KeyError, match="a hit has the keys 'doc', 'line' and 'text'"):
        code_hit["Version"]


def test_code_outline_matches_ast():
    path = STDLIB / "shelve.py"
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    top_functions = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    outline = code_outline(text)
    assert [d["name"] for d in code_outline(text, kind="function", parent=None)] == top_functions
    shelf = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Shelf")
    methods = [n.name for n in shelf.body if isinstance(n, ast.FunctionDef)]
    assert [d["name"] for d in outline if d["parent"] == "Shelf"] == methods
    init = code_outline(text, name="__init__", parent="Shelf")[0]
    assert init["args"][0] == "self" and init["defaults"]["writeback"] == "False"
    assert init["end_line"] >= init["line"]
    cls = code_outline(text, kind="class", name="DbfilenameShelf")[0]
    assert cls["bases"] == ["Shelf"]


def test_outline_of_several_documents_names_them_and_skips_non_python():
    data = {"a.py": "def f(x, *a, k=1, **kw):\n    pass\n", "notes.txt": "not (python"}
    (f,) = code_outline(data)
    assert f["doc"] == "a.py" and f["args"] == ["x", "*a", "k", "**kw"]
    assert f["defaults"] == {"k": "1"} and f["text"] == "def f(x, *a, k=1, **kw):"


def test_views_are_detected_cheaply():
    assert detect_views(RECORDS) == ["records"]
    assert sample_fields(RECORDS) == ["Package", "Version", "Installed-Size", "Description"]
    assert detect_views({"a.py": "import os\n\ndef f():\n    pass\n"}) == ["python"]
    assert detect_views("Just some prose.\nMore prose.") == []
