"""One rendered block of a doc: where it lies, which results JSON it is rendered from, and
by what (the registry of them all: :mod:`benchmarks._docs_registry`)."""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Table:
    marker: str
    """``<!-- marker -->`` ... ``<!-- /marker -->`` in the doc."""
    doc: str
    """The doc, relative to the repository root."""
    results: str
    """The results JSON, relative to the repository root."""
    render: str
    """``module:function`` taking the parsed JSON and returning the table's markdown."""

    def rendered(self) -> str:
        mod, fn = self.render.split(":")
        data: Any = json.loads((ROOT / self.results).read_text())
        text: str = getattr(importlib.import_module(mod), fn)(data)
        return text.strip("\n")

    def current(self) -> str | None:
        """The text between the doc's markers, or None when the markers are missing."""
        m = _pattern(self.marker).search((ROOT / self.doc).read_text())
        return None if m is None else m.group(2).strip("\n")

    def write(self) -> bool:
        """Put the rendering between the markers; True if the doc changed."""
        path = ROOT / self.doc
        text = path.read_text()
        new, n = _pattern(self.marker).subn(
            lambda m: f"{m.group(1)}\n{self.rendered()}\n{m.group(3)}", text
        )
        if n != 1:
            raise SystemExit(f"{self.doc}: expected one <!-- {self.marker} --> block, found {n}")
        if new != text:
            path.write_text(new)
        return new != text


def _pattern(marker: str) -> re.Pattern[str]:
    m = re.escape(marker)
    # the closing marker keeps its indentation (a table inside a list item)
    return re.compile(rf"(<!-- {m} -->)(.*?)([ \t]*<!-- /{m} -->)", re.S)
