"""Every table of measured numbers in docs/ equals its rendering from its results JSON
(``benchmarks/docs_tables.py``): a rerun that changes a number changes the doc, or this
fails."""

from __future__ import annotations

import pytest

from benchmarks.docs_tables import TABLES


@pytest.mark.parametrize("table", TABLES, ids=lambda t: t.marker)
def test_doc_table_matches_its_results(table) -> None:  # type: ignore[no-untyped-def]
    current = table.current()
    assert current is not None, f"{table.doc} has no <!-- {table.marker} --> block"
    assert current == table.rendered(), (
        f"{table.doc} <!-- {table.marker} --> differs from {table.results}: "
        "run .venv/bin/python -m benchmarks.docs_tables"
    )
