"""Documents generated from measured results stay what their sources give: a new result, or a hand edit of the
generated file, fails here until the generator is run again."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import performance_doc
from scripts.matrix_table import table

REPO = Path(__file__).resolve().parent.parent


def test_performance_doc_is_what_the_results_give() -> None:
    """docs/performance.md is benchmarks/performance_doc.py's rendering of benchmarks/results/."""
    assert performance_doc.TARGET.read_text(encoding="utf-8") == performance_doc.render(), (
        "docs/performance.md is stale: run python benchmarks/performance_doc.py"
    )


def test_performance_doc_shows_every_kind_of_result() -> None:
    text = performance_doc.TARGET.read_text(encoding="utf-8")
    for kind in performance_doc.KINDS:
        newest = performance_doc.newest(kind)
        if newest is not None:
            assert f"## {kind.title}" in text and newest.name in text


def test_compatibility_doc_holds_the_matrix_table() -> None:
    """docs/compatibility.md's measured table is scripts/matrix_table.py's rendering of the committed matrix JSON."""
    cells = json.loads((REPO / "docs" / "compatibility-matrix.json").read_text(encoding="utf-8"))
    rendered = table(cells).strip()
    assert rendered in (REPO / "docs" / "compatibility.md").read_text(encoding="utf-8"), (
        "docs/compatibility.md is stale: rerun python scripts/matrix_table.py docs/compatibility-matrix.json"
    )
