"""Tables of measured numbers in ``docs/``, each rendered from its results JSON.

Why one registry: a number typed into a doc drifts from the run that produced it. Each
table here lives in its doc between ``<!-- NAME -->`` and ``<!-- /NAME -->`` markers and is
rewritten from ``benchmarks/results/*.json`` by its ``render`` function;
``tests/unit/test_docs_tables.py`` fails when a doc no longer equals its rendering.

Rewrite every table: ``.venv/bin/python -m benchmarks.docs_tables``.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._doc_table import ROOT, Table
from benchmarks._docs_registry import TABLES

__all__ = ["ROOT", "TABLES", "Table", "table"]


def table(marker: str) -> Table:
    """The registered table with this marker (a benchmark that writes its JSON then
    rewrites its doc's table through this)."""
    return next(t for t in TABLES if t.marker == marker)


def main() -> int:
    import argparse

    argparse.ArgumentParser(
        description="Rewrite every registered docs table from its JSON."
    ).parse_args()
    for t in TABLES:
        if t.write():
            sys.stderr.write(f"updated {t.doc} <!-- {t.marker} -->\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
