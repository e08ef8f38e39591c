"""``lyra profile predict FILE --json OUT``: fill in the pairs a throughput table lacks.

Reads a Gavel-format throughput JSON (``lyra profile run``'s output, or Gavel's own),
predicts the share of its alone speed each job keeps beside every partner nobody
measured (:mod:`lyra_ray.model.interference`), and writes the completed table, every
predicted entry listed under ``predicted``. Measured entries are copied unchanged.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError


def add_predict_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``predict`` to the ``lyra profile`` group's subcommands."""
    p = sub.add_parser(
        "predict",
        help="predict the pair entries a throughput table lacks",
        description=__doc__,
    )
    p.add_argument("file", metavar="FILE", help="Gavel-format throughput JSON to complete")
    p.add_argument(
        "--json", dest="json_out", required=True, metavar="OUT", help="where to write it"
    )
    p.set_defaults(func=run_predict)


def run_predict(args: argparse.Namespace) -> int:
    """Validate FILE, predict its missing pairs, write OUT, print what was done."""
    from lyra_ray.model.interference import EXTRA_KEYS, predict_table
    from lyra_ray.model.throughput import load_gavel_throughputs

    src = Path(args.file)
    # The loader's checks first: a damaged file is refused with a line naming the field
    # rather than half-predicted. Then the raw JSON, so unknown fields survive.
    load_gavel_throughputs(src)
    raw: Any = json.loads(src.read_text())
    out = predict_table(raw)
    dst = Path(args.json_out)
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    except OSError as e:
        raise InputError(f"--json: cannot write {dst}: {e.strerror}") from None
    new = {(p[0], p[1], p[2]) for p in out["predicted"]} - {
        (p[0], p[1], p[2]) for p in raw.get("predicted", [])
    }
    total = 0
    for gpu, table in out.items():
        if gpu in EXTRA_KEYS or not isinstance(table, dict):
            continue
        entries = sum(
            sum(1 for k in e if k != "null") for e in table.values() if isinstance(e, dict)
        )
        filled = sum(1 for g, _, _ in new if g == gpu)
        listed = sum(1 for p in out["predicted"] if p[0] == gpu)
        note = " (not predicted: *_unconsolidated)" if gpu.endswith("_unconsolidated") else ""
        print(
            f"{gpu}: {len(table)} jobs, {entries - listed} pair entries measured, "
            f"{filled} predicted now"
            + (f", {listed - filled} predicted before" if listed > filled else "")
            + note
        )
        total += filled
    print(f"wrote {dst}: {total} pair entries predicted")
    return 0
