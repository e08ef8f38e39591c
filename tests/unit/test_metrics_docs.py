"""docs/observability.md documents every metric lyra exports, as the catalogue defines it."""

from __future__ import annotations

import re
from pathlib import Path

from lyra_ray.telemetry.catalogue import METRICS

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"


def _table_rows() -> dict[str, list[str]]:
    """`name` -> the other cells of its row in the metrics table."""
    rows: dict[str, list[str]] = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.fullmatch(r"`(lyra_[a-z0-9_]+)`", cells[0]) if len(cells) >= 4 else None
        if m:
            rows[m.group(1)] = cells[1:]
    return rows


def test_every_catalogue_metric_has_a_row_with_its_kind_and_labels() -> None:
    rows = _table_rows()
    for d in METRICS:
        assert d.name in rows, f"{d.name} is not documented in {DOC.name}"
        kind, labels = rows[d.name][0], rows[d.name][1]
        assert kind == d.kind, d.name
        assert re.findall(r"`(\w+)`", labels) == list(d.labels), d.name
    assert set(rows) == {d.name for d in METRICS}, "the table documents a metric lyra lacks"
