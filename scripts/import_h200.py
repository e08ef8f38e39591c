"""Copy the H200 measurements into the package: ``lyra_ray/model/data/h200_throughputs.json``.

Run again when ``../shared/data/gpu/h200.json`` changes:
``.venv/bin/python scripts/import_h200.py [PATH]``. The unit test
``tests/unit/test_h200_catalogue.py`` keeps the copy equal to the source where it exists.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lyra_ray.model.measured import H200_FILE, h200_table

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared/data/gpu/h200.json"
    table = h200_table(json.loads(src.read_text()))
    out = ROOT / "lyra_ray/model/data" / H200_FILE
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    sys.stderr.write(f"wrote {out.relative_to(ROOT)} from {src}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
