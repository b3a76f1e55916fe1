"""Structure-aware search over a REPL variable: documents, hits with their document and line.

A long input usually holds several documents: a dict of files, a list of records, or one
string made of files joined under header lines (``### FILE: a.py``, ``==> a.py <==``,
``--- a.py ---``) or of blank-line-separated ``Key: value`` records.  Small models lose the
document when they search line by line (they answer a line number when the question asked
for a file).  These functions keep it: :func:`split_documents` returns ``{name: text}`` and
:func:`search_lines` returns hits as ``{"doc", "line", "text"}``, so the field the question
asks for is there to pick.

Header detection is generic: a string is a concatenation when its first non-blank line and
at least one later line have the same *shape* (the line with its path-like token replaced by
a placeholder) and that shape is decorated (a marker such as ``#``, ``=``, ``-``, ``<``,
``FILE:``) rather than code.  Records follow RFC 822's field syntax (``Name: value`` lines,
records separated by blank lines), as in e-mail headers and Debian control files; a record's
name is the value of its first field.  Pure functions of their input; no Jupyter import.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["split_documents", "search_lines", "describe_structure", "Hit", "Hits", "Listing",
           "parse_block", "field_of", "matches", "is_document", "select_documents"]



DOCS_SHOWN = 6
"""Documents named in a listing's per-document count (the ones with most items)."""


class Listing(list):
    """A plain list whose repr starts with how many items it holds and shows at most
    the first few, one per line, so printing a long result never floods the model's
    output.  ``noun`` names the items (``"hit"``, ``"record"``...).  When the items
    are dicts from more than one document (a ``"doc"`` key), the first line also
    counts them per document (the :data:`DOCS_SHOWN` largest), so a question about
    one document shows at a glance that the result needs ``doc=``."""

    noun = "item"
    shown = 10

    def __repr__(self) -> str:
        n = len(self)
        if not n:
            return f"0 {self.noun}s"
        lines = "\n".join(self._show(x) for x in self[: self.shown])
        more = f"\n... and {n - self.shown} more" if n > self.shown else ""
        return f"{n} {self.noun}{'s' if n > 1 else ''}{self._per_document()}:\n{lines}{more}"

    def _per_document(self) -> str:
        """`` in 3 documents (a.py 5, b.py 2, c.py 1; doc="name" keeps one)`` or ``""``."""
        counts: dict[str, int] = {}
        for item in self:
            doc = item.get("doc") if isinstance(item, dict) else None
            if doc is None:
                return ""
            counts[str(doc)] = counts.get(str(doc), 0) + 1
        if len(counts) < 2:
            return ""
        top = sorted(counts.items(), key=lambda kv: -kv[1])[:DOCS_SHOWN]
        rest = ", ..." if len(counts) > DOCS_SHOWN else ""
        listed = ", ".join(f"{doc} {k}" for doc, k in top)
        return f' in {len(counts)} documents ({listed}{rest}; doc="name" keeps one)'

    __str__ = __repr__

    def _show(self, item: Any) -> str:
        return repr(item)


class Hit(dict):
    """One search hit, ``{"doc": document name, "line": line number in it (from 1),
    "text": the line}``.  Any other key is looked up among the fields of the hit's
    document when that document is a ``Key: value`` record, so ``hit["Version"]``
    works on records; otherwise the ``KeyError`` names the keys there are."""

    __slots__ = ("_document",)
    _document: str

    def __missing__(self, key: Any) -> Any:
        record = parse_block(getattr(self, "_document", "") or "")
        if record:
            value = field_of(record, key)
            return int(value) if re.fullmatch(r"-?\d{1,18}", value) else value
        raise KeyError(f"{key!r}: a hit has the keys 'doc', 'line' and 'text'")


class Hits(Listing):
    """What :func:`search_lines` returns: a list of hit dicts (see :class:`Listing`)."""

    noun = "hit"

# A token that names a file or path: has an extension or a slash (a/b, a.py, ./x/y.txt).
_PATH = re.compile(r"[\w.\-~+@]*[\w\-~+@](?:/[\w.\-~+@]+)+/?|[\w\-~+@][\w.\-~+@]*\.[A-Za-z]\w{0,7}")
# The decoration a header carries around the name (not letters: code lines have words).
_DECOR = re.compile(r"^\W*(?:(?:file|path|document|source|name|title)\b\W*)*$", re.I)
# One word between marks: at least two mark characters before it.
_WORD = re.compile(r"^(\s*[^\w\s]{2,}\s*)([\w][\w.\-+]*)(\s*[^\w\s]*\s*)$")
# Marks, an optional label ending in a colon, then a name of any words (spaces, dots),
# then optional closing marks: "=== LICENSE FILE: Apache-2.0", "== Release notes 2.0 ==".
_LABELLED = re.compile(r"^(\s*[^\w\s]{2,}\s*(?:[A-Za-z][\w .\-]{0,40}:\s*)?)(\w.*?)(\s*[^\w\s]*)\s*$")
_FIELD = re.compile(r"^([A-Za-z][\w-]{0,40}):(?:\s|$)")
_RECORD_FIELD = re.compile(r"^([A-Za-z][\w-]{0,60}):[ \t]?(.*)$")
_MAX_HEADER = 300  # characters: longer lines are never headers
_DESCRIBE_CHARS = 20_000_000  # characters of a huge string looked at to describe it


def _shape(line: str) -> tuple[str, str] | None:
    """``(template, name)`` of a header-like line, or None.

    The name is the line's last path-like token after a decoration (``### FILE: a.py``,
    ``==> a/b.py <==``), else its one word between marks (``==> GPL-3 <==``, ``## intro``),
    else the words after marks and a label (``=== LICENSE FILE: Apache-2.0``,
    ``=== CHANGELOG: bash``) or between marks on both sides (``== Release notes 2.0 ==``).
    The template is the line with the name taken out: the lines of one text that share
    it are its headers.
    """
    if not line.strip() or len(line) > _MAX_HEADER:
        return None
    tokens = list(_PATH.finditer(line))
    match = tokens[-1] if tokens else None  # the last path-like token is the name
    if match is not None:
        before, after = line[: match.start()], line[match.end():]
        if not before.strip() and not after.strip():
            return None  # a bare path is data, not a header
        if _DECOR.match(before) and re.fullmatch(r"\W*", after):
            return f"{before}\0{after}", match.group(0)
    word = _WORD.match(line)
    if word is not None:
        return f"{word.group(1)}\0{word.group(3)}", word.group(2)
    labelled = _LABELLED.match(line)
    if labelled is not None and (":" in labelled.group(1) or labelled.group(3).strip()):
        name, after = labelled.group(2), labelled.group(3)
        for opening, closing in ("()", "[]", "{}"):  # "GPL 3 (or later)" keeps its ")"
            while name.count(opening) > name.count(closing) and \
                    after.lstrip().startswith(closing):
                cut = after.index(closing) + 1
                name, after = name + after[:cut], after[cut:]
        return f"{labelled.group(1)}\0{after}", name
    return None


def _common_words(names: list[str]) -> str:
    """The leading whole words all header names share (``"MODULE "`` of ``"MODULE a.py"``,
    ``"MODULE b.py"``: a constant prefix is decoration), when each name keeps something
    after them; else ``""``."""
    split = [name.split(" ") for name in names]
    n = 0
    while all(len(words) > n + 1 and words[n] == split[0][n] for words in split):
        n += 1
    return " ".join(split[0][:n]) + " " if n else ""



def _split_headers(text: str) -> dict[str, str] | None:
    lines = text.splitlines()
    first = next((i for i, ln in enumerate(lines) if ln.strip()), None)
    if first is None:
        return None
    shaped = _shape(lines[first])
    if shaped is None:
        return None
    template = shaped[0]
    starts = [(i, s[1]) for i, ln in enumerate(lines)
              if (s := _shape(ln)) is not None and s[0] == template]
    if len(starts) < 2:
        return None
    shared = _common_words([name for _, name in starts])
    starts = [(i, name[len(shared):]) for i, name in starts]
    docs: dict[str, str] = {}
    for k, (i, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        key = _unique(docs, name)
        docs[key] = "\n".join(lines[i + 1:end])
    return docs


def _split_records(text: str) -> dict[str, str] | None:
    blocks = [b for b in re.split(r"\n[ \t]*\n", text.strip("\n")) if b.strip()]
    if len(blocks) < 2:
        return None
    keys = [_FIELD.match(b) for b in blocks]
    if sum(k is not None for k in keys) < 0.9 * len(blocks):
        return None
    docs: dict[str, str] = {}
    for block in blocks:
        first = block.split("\n", 1)[0]
        name = first.split(":", 1)[1].strip() if ":" in first else first.strip()
        docs[_unique(docs, name or "record")] = block
    return docs


def parse_block(block: str) -> dict[str, str] | None:
    """One ``Key: value`` record (continuation lines start with whitespace and are
    joined with newlines) as a dict, or None if a line is not a field."""
    record: dict[str, str] = {}
    last = None
    for line in block.splitlines():
        if not line.strip():
            continue
        if line[:1] in " \t" and last is not None:
            record[last] += "\n" + line.strip()
            continue
        match = _RECORD_FIELD.match(line)
        if match is None:
            return None
        last = match.group(1)
        record[last] = match.group(2).strip()
    return record or None


def _norm(key: Any) -> str:
    return str(key).lower().replace("_", "-")


def field_of(item: Mapping[str, Any], key: str) -> Any:
    """``item[key]`` with the key matched ignoring case and ``_``/``-``.

    Raises:
        KeyError: no such field (the message lists the fields there are).
    """
    if key in item:
        return item[key]
    want = _norm(key)
    for k, v in item.items():
        if _norm(k) == want:
            return v
    raise KeyError(f"{key!r}: the fields are {', '.join(map(repr, item))}")


def matches(item: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """True when every ``where`` field of ``item`` equals its value (strings compared
    ignoring case and surrounding space; a missing field never matches)."""
    for key, want in where.items():
        try:
            have = field_of(item, key)
        except KeyError:
            return False
        if isinstance(have, str) and isinstance(want, str):
            if have.strip().lower() != want.strip().lower():
                return False
        elif have != want and str(have) != str(want):
            return False
    return True


def _unique(docs: Mapping[str, Any], name: str) -> str:
    if name not in docs:
        return name
    n = 2
    while f"{name}#{n}" in docs:
        n += 1
    return f"{name}#{n}"


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, Mapping):
        return "\n".join(f"{k}: {v}" for k, v in value.items())
    return str(value)


def _split_at(text: str, header: str) -> dict[Any, str]:
    """Documents of ``text`` under the lines that match the regular expression ``header``
    (``re.match`` at the line's start; its first group, else the whole line, names the
    document).  Text before the first header is a document named None.

    Raises:
        re.error: ``header`` is not a valid expression.
        ValueError: no line matches ``header``.
    """
    pattern = re.compile(header)
    lines = text.splitlines()
    starts = []
    for i, line in enumerate(lines):
        match = pattern.match(line)
        if match is not None:
            name = next((g for g in match.groups() if g is not None), match.group(0))
            starts.append((i, name.strip()))
    if not starts:
        raise ValueError(f"no line matches the header {header!r}; lines start like "
                         f"{[ln[:40] for ln in lines[:3]]}")
    docs: dict[Any, str] = {}
    preamble = "\n".join(lines[: starts[0][0]])
    if preamble.strip():
        docs[None] = preamble
    for k, (i, name) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        docs[_unique(docs, name)] = "\n".join(lines[i + 1:end])
    return docs


def split_documents(data: Any, header: str | None = None) -> dict[Any, str]:
    """Split ``data`` into its documents, ``{name: text}``.

    Args:
        data: a ``dict`` (keys are the names; values as text), a ``list``/``tuple``
            (index -> item as text; a dict item becomes ``key: value`` lines), or a
            ``str``: files joined under repeated header lines (the header is the
            name and is not part of the text), blank-line-separated ``Key: value``
            records (named by their first field's value), or else one document
            named ``None``.
        header: for a string, the header line as a regular expression
            (``r"=== CHANGELOG: (.+)"``), matched at each line's start; its first
            group (else the whole line) names each document, and text before the first
            header is a document named None.  Default: found by shape (see
            :func:`_shape`).  Ignored for a dict or a list (their documents are given).

    Returns:
        An insertion-ordered dict; duplicate names get ``#2``, ``#3`` suffixes.

    Raises:
        ValueError: ``header`` matches no line; re.error: ``header`` is not a valid
            regular expression.
    """
    if isinstance(data, Mapping):
        return {k: _as_text(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return {i: _as_text(v) for i, v in enumerate(data)}
    text = _as_text(data)
    if header is not None:
        return _split_at(text, header)
    return _split_headers(text) or _split_records(text) or {None: text}


def is_document(name: Any, wanted: Any) -> bool:
    """True when document ``name`` is the one ``wanted`` names: the same name (text
    compared ignoring case), or a path that ends with it (``"json/decoder.py"`` for
    ``"decoder.py"``)."""
    if name == wanted:
        return True
    have, want = str(name).lower().strip(), str(wanted).lower().strip().lstrip("./")
    return bool(want) and (have == want or have.endswith("/" + want))


def select_documents(docs: Mapping[Any, str], doc: Any) -> dict[Any, str]:
    """The documents of ``docs`` that ``doc`` names (:func:`is_document`).

    Raises:
        KeyError: none does (the message lists the first names there are).
    """
    chosen = {name: text for name, text in docs.items() if is_document(name, doc)}
    if not chosen:
        names = ", ".join(repr(n) for n in list(docs)[:8])
        raise KeyError(f"no document {doc!r}; the documents are {names}"
                       f"{', ...' if len(docs) > 8 else ''}")
    return chosen


def _matcher(pattern: str, regex: bool, ignore_case: bool):
    if regex:
        compiled = re.compile(pattern, re.I if ignore_case else 0)
        return lambda line: compiled.search(line) is not None
    if ignore_case:
        needle = pattern.lower()
        return lambda line: needle in line.lower()
    return lambda line: pattern in line


def _iter_hits(docs: Mapping[Any, str], pattern: str, regex: bool,
               ignore_case: bool) -> Iterator[Hit]:
    match = _matcher(pattern, regex, ignore_case)
    for name, text in docs.items():
        for number, line in enumerate(text.splitlines(), 1):
            if match(line):
                hit = Hit(doc=name, line=number, text=line.strip()[:200])
                hit._document = text
                yield hit


def search_lines(data: Any, pattern: str, *, regex: bool = False, ignore_case: bool = False,
                 max_hits: int | None = None, header: str | None = None,
                 doc: Any = None) -> Hits:
    """The lines of ``data`` that contain ``pattern``, with the document each is in.

    Args:
        data: as for :func:`split_documents`.
        pattern: a substring (or a regular expression with ``regex=True``).
        regex: treat ``pattern`` as a ``re`` pattern (``re.search`` per line).
        ignore_case: match case-insensitively.
        max_hits: stop after this many hits (None = all).
        header: the documents' header line as a regular expression (see
            :func:`split_documents`).
        doc: search only this document (:func:`select_documents`: its name, or the
            end of its path).

    Returns:
        :class:`Hits`, ``[{"doc": name, "line": n, "text": line}, ...]`` in document
        order, except that for a bare name (``search("parse")``) the lines that
        define it (``def parse``, ``class parse``) come first; ``line``
        counts from 1 within the document (within the whole string when the
        string holds one document); ``text`` is the stripped line, at most 200
        characters.

    Raises:
        re.error: ``regex=True`` and ``pattern`` (or ``header``) is not a valid expression.
        KeyError: ``doc`` names no document.
        ValueError: ``header`` matches no line.
    """
    docs = split_documents(data, header)
    if doc is not None:
        docs = select_documents(docs, doc)
    hits = Hits()
    for hit in _iter_hits(docs, pattern, regex, ignore_case):
        hits.append(hit)
        if max_hits is not None and len(hits) >= max_hits:
            break
    if not regex and re.fullmatch(r"[A-Za-z_]\w*", pattern):
        defines = re.compile(rf"^(?:async\s+)?(?:def|class)\s+{pattern}\b",
                             re.I if ignore_case else 0)
        hits.sort(key=lambda h: defines.match(h["text"]) is None)  # stable: definitions first
    return hits


def describe_structure(data: Any, sample: int = 3) -> str | None:
    """One line on how ``data`` splits into documents, for the model's task message.

    Returns None when ``data`` is one unstructured string.  Examples:
    ``"a str of 12 documents (header lines like '==> a/b.py <=='; first: 'a/b.py', ...)"``.
    """
    at_least = ""
    if isinstance(data, str) and len(data) > _DESCRIBE_CHARS:
        data, at_least = data[:_DESCRIBE_CHARS], "at least "
    docs = split_documents(data)
    if list(docs) == [None]:
        return None
    names = ", ".join(repr(n)[:60] for n in list(docs)[:sample])
    more = ", ..." if len(docs) > sample else ""
    kind = type(data).__name__
    how = ""
    if isinstance(data, str):
        first = next(ln for ln in data.splitlines() if ln.strip())
        how = ("records of 'Key: value' lines" if _FIELD.match(first) and not _shape(first)
               else f"header lines like {first.strip()[:80]!r}")
        how = f"; {how}"
    return f"a {kind} of {at_least}{len(docs):,} documents{how}; names: {names}{more}"
