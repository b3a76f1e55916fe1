"""The "What model code cannot break" table of docs/security.md names, in each row, the
tests that try the attack: every test and test file it names exists (a renamed or
deleted test turns this red, so a row never points at nothing)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _table_rows() -> list[str]:
    text = (ROOT / "docs" / "security.md").read_text()
    section = text.split("| Model code tries to |", 1)[1].split("\n\n", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")
            and not line.startswith("|---")]


def test_every_row_names_a_test_and_every_named_test_exists():
    sources = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    files = {p.name for p in (ROOT / "tests").rglob("test_*.py")}
    rows = _table_rows()
    assert len(rows) >= 10
    for row in rows:
        names = re.findall(r"`(test_[A-Za-z0-9_]+(?:\.py)?)`", row.rsplit("|", 2)[-2])
        assert names, row
        for name in names:
            if name.endswith(".py"):
                assert name in files, name
            else:
                assert re.search(rf"^def {name}\(", sources, re.M), name
