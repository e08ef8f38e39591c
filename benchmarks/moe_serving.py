"""Serving p50/p95 latency and tokens/s: Lina (popularity-based) vs uniform replicas.

Run: ``.venv/bin/python benchmarks/moe_serving.py [--mode calibrated|real|both]``.
Writes benchmarks/results/moe_serving.json. Same as ``lyra moe bench``; see moe_serving/bench.py.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from moe_serving.cli import _add_model_args, add_bench_args, bench_main  # noqa: E402


def main() -> int:
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    p = argparse.ArgumentParser(description=__doc__)
    _add_model_args(p)
    add_bench_args(p)
    p.set_defaults(json=str(ROOT / "benchmarks" / "results" / "moe_serving.json"))
    return bench_main(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
