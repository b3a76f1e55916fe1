"""Structure-aware search: documents of a dict, a list, a headed string, records."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest

from rlm_kernel.context.documents import describe_structure, search_lines, split_documents

STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = {p.name: p.read_text(encoding="utf-8") for p in sorted((STDLIB / "json").glob("*.py"))}


@pytest.mark.parametrize("header", ["### FILE: {}", "==> pkg/{} <==", "--- {} ---",
                                    '<document name="{}">', "File: {}", "# path: {}"])
def test_a_string_of_files_splits_at_its_header_lines(header):
    text = "\n".join(header.format(name) + "\n" + body for name, body in FILES.items())
    docs = split_documents(text)
    assert [Path(str(n)).name for n in docs] == list(FILES)
    assert [t.rstrip("\n") for t in docs.values()] == [b.rstrip("\n") for b in FILES.values()]
    hits = search_lines(text, "def dumps(")
    assert len(hits) == 1
    assert Path(hits[0]["doc"]).name == "__init__.py"
    line = FILES["__init__.py"].splitlines().index(hits[0]["text"]) + 1
    assert hits[0]["line"] == line  # counted inside the document, not the whole string
    assert "documents" in describe_structure(text)


def test_code_and_prose_are_one_document():
    source = (STDLIB / "fractions.py").read_text(encoding="utf-8")
    assert list(split_documents(source)) == [None]
    assert describe_structure(source) is None
    hits = search_lines(source, "class Fraction(")
    assert hits[0]["doc"] is None
    assert source.splitlines()[hits[0]["line"] - 1].strip() == hits[0]["text"]


def test_records_are_named_by_their_first_field():
    text = ("Package: alpha\nVersion: 1.0\nDepends: beta\n\n"
            "Package: beta\nVersion: 2.1\n\nPackage: gamma\nVersion: 0.3\nDepends: beta\n")
    docs = split_documents(text)
    assert list(docs) == ["alpha", "beta", "gamma"]
    assert [h["doc"] for h in search_lines(text, "Depends: beta")] == ["alpha", "gamma"]
    assert "3 documents" in describe_structure(text)


def test_dicts_lists_and_options():
    data = {"a.txt": "one\nTwo\nthree", "b.txt": "two two"}
    assert search_lines(data, "two") == [{"doc": "b.txt", "line": 1, "text": "two two"}]
    assert [h["doc"] for h in search_lines(data, "two", ignore_case=True)] == ["a.txt", "b.txt"]
    assert [h["line"] for h in search_lines(data, r"^t\w+e", regex=True)] == [3]
    items = ["x\ny", {"name": "z", "size": 3}]
    assert search_lines(items, "size") == [{"doc": 1, "line": 2, "text": "size: 3"}]
    assert split_documents(items)[1] == "name: z\nsize: 3"
    assert len(search_lines(data, "t", max_hits=2)) == 2


def test_duplicate_names_stay_apart():
    text = "==> a.py <==\nx = 1\n==> a.py <==\nx = 2\n"
    assert split_documents(text) == {"a.py": "x = 1", "a.py#2": "x = 2"}


def test_headers_may_name_a_document_with_one_word_between_marks():
    text = "==> GPL-3 <==\nterms\n==> BSD <==\nmore terms\n"
    assert split_documents(text) == {"GPL-3": "terms", "BSD": "more terms"}
    # A one-mark comment repeated in code is not a header; two marks make one.
    code = "# TODO\nx = 1\n# TODO\ny = 2\n"
    assert split_documents(code) == {None: code}
    assert split_documents("## TODO\nx = 1\n## DONE\ny = 2\n") == {"TODO": "x = 1",
                                                                     "DONE": "y = 2"}


def test_a_bare_name_lists_its_definitions_first():
    data = {"a.py": "x = resolve(1)  # resolve it\n", "b.py": "def resolve(c):\n    pass\n"}
    assert [h["doc"] for h in search_lines(data, "resolve")] == ["b.py", "a.py"]
    assert [h["doc"] for h in search_lines(data, "resolve(")] == ["a.py", "b.py"]


LICENSES = {"Apache-2.0": "Licensed under the Apache License\nVersion 2.0",
            "GPL 3 (or later)": "GNU GENERAL PUBLIC LICENSE\nVersion 3",
            "python3.11": "changes\n * fixed the build"}


@pytest.mark.parametrize("header", ["=== LICENSE FILE: {}", "=== CHANGELOG: {}",
                                    "== {} ==", "##### {} #####", "*** {} ***",
                                    ">>> Document: {}", "<<< LICENCE TEXT {} >>>"])
def test_any_repeated_header_names_its_documents(header):
    text = "\n".join(header.format(name) + "\n" + body for name, body in LICENSES.items())
    assert split_documents(text) == LICENSES
    assert [(h["doc"], h["line"]) for h in search_lines(text, "Version")] == \
        [("Apache-2.0", 2), ("GPL 3 (or later)", 2)]
    assert "3 documents" in describe_structure(text)


def test_comment_lines_of_words_are_not_headers():
    sql = "-- users by day\nselect 1;\n-- users by week\nselect 2;\n"
    assert split_documents(sql) == {None: sql}
    assert split_documents("## see a.py for more\nx\n## see b.py for more\ny\n") == {
        None: "## see a.py for more\nx\n## see b.py for more\ny\n"}


def test_a_header_named_explicitly_splits_any_text():
    text = ("Preamble line\nPKG bash 5.2 -- shells\nfixed a crash\nPKG dash 0.5 -- shells\n"
            "sped up\n")
    docs = split_documents(text, header=r"PKG (\S+)")
    assert docs == {None: "Preamble line", "bash": "fixed a crash", "dash": "sped up"}
    assert [h["doc"] for h in search_lines(text, "s", header=r"PKG (\S+)")] == \
        ["bash", "dash"]
    with pytest.raises(ValueError, match="no line matches the header"):
        split_documents(text, header=r"=== (.+)")


def test_one_document_by_name_or_the_end_of_its_path():
    data = {"json/decoder.py": "class JSONDecoder:\n    pass\n",
            "json/encoder.py": "class JSONEncoder:\n    pass\nclass Other:\n    pass\n"}
    assert [h["doc"] for h in search_lines(data, "class", doc="encoder.py")] == \
        ["json/encoder.py"] * 2
    from rlm_kernel.context.structure import code_outline

    assert [d["name"] for d in code_outline(data, doc="encoder.py", kind="class")] == \
        ["JSONEncoder", "Other"]
    with pytest.raises(KeyError, match="no document 'parser.py'; the documents are "
                                       "'json/decoder.py', 'json/encoder.py'"):
        search_lines(data, "class", doc="parser.py")


def test_a_listing_over_several_documents_counts_them_per_document():
    from rlm_kernel.context.documents import DOCS_SHOWN, Hits

    data = {"pkg/a.py": "def f(): pass\ndef g(): pass\n", "pkg/b.py": "def h(): pass\n",
            "pkg/c.txt": "nothing"}
    hits = search_lines(data, "def ")
    first = repr(hits).splitlines()[0]
    assert first == '3 hits in 2 documents (pkg/a.py 2, pkg/b.py 1; doc="name" keeps one):'
    one = search_lines(data, "def ", doc="b.py")
    assert repr(one).splitlines()[0] == "1 hit:"
    many = Hits({"doc": f"d{i}.py", "line": 1, "text": "x"} for i in range(DOCS_SHOWN + 2))
    assert repr(many).splitlines()[0].endswith(', ...; doc="name" keeps one):')
    assert repr(Hits([{"line": 1, "text": "x"}, {"line": 2, "text": "y"}])).startswith(
        "2 hits:\n")
