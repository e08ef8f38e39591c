"""Derive the scaling curves Lyra ships (``lyra_ray/model/data/curves.json``) from Pollux profiles.

Source: Pollux/AdaptDL (OSDI'21) simulator inputs, Apache-2.0,
``../shared/data/pollux/profiles/<model>/{placements,scalability}.csv`` — measured step
times of six models (bert, cifar10, deepspeech2, imagenet, ncf, yolov3) against worker
count and placement. We fix one per-worker batch size per model (the median of the sizes
measured at every worker count: weak scaling, as an elastic data-parallel job that keeps
its local batch) and compute samples/s = workers x local_bsz / step_time:

* 1..16 workers from ``placements.csv``, consolidated placements (4 GPUs per node, the
  fullest nodes first: "1", "2", ..., "4", "14", "24", ..., "4444");
* 20..64 workers from ``scalability.csv`` (16 nodes).

``speedup(n) = samples/s(n) / samples/s(1)``.

``spread(n)`` is the same ratio for ``n`` = 2..8 workers split over *two* nodes (the best
measured split: "11", "12", "13" or "22", ...): a job whose flexible workers sit on a
loaned server of another type always spans two servers, even when a consolidated job of
its size would fit on one (``lyra_ray/model/mixed.py``). The project must run without the shared
data, so the derived table is committed; rerun this script to regenerate it:

    .venv/bin/python benchmarks/derive_curves.py [--data DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
from pathlib import Path

MODELS = ("bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3")
ROOT = Path(__file__).resolve().parents[1]


def shared_data() -> Path:
    env = os.environ.get("LYRA_SHARED_DATA")
    return Path(env) if env else ROOT / ".." / "shared" / "data"


def consolidated(n: int, per_node: int = 4) -> str:
    """Pollux's placement string for ``n`` GPUs on the fewest 4-GPU nodes (ascending)."""
    full, rest = divmod(n, per_node)
    return (str(rest) if rest else "") + str(per_node) * full


def curve(model_dir: Path) -> tuple[int, dict[int, float]]:
    place = list(csv.DictReader((model_dir / "placements.csv").open()))
    scale = list(csv.DictReader((model_dir / "scalability.csv").open()))
    by_n: dict[int, set[int]] = {}
    for r in scale:
        by_n.setdefault(int(r["num_replicas"]), set()).add(int(r["local_bsz"]))
    common = set.intersection(*by_n.values())
    bsz = int(statistics.median_low(sorted(common)))
    step: dict[int, float] = {}
    for n in range(1, 17):
        key = consolidated(n)
        rows = [r for r in place if r["placement"] == key and int(r["local_bsz"]) == bsz]
        if rows:
            step[n] = float(rows[0]["step_time"])
    for r in scale:
        n = int(r["num_replicas"])
        if n > 16 and int(r["local_bsz"]) == bsz:
            step[n] = float(r["step_time"])
    rate = {n: n * bsz / t for n, t in step.items()}
    return bsz, {n: round(rate[n] / rate[1], 4) for n in sorted(rate)}


def spread(model_dir: Path, bsz: int) -> dict[int, float]:
    """Speedup of ``n`` = 2..8 workers on exactly two nodes, the best measured split."""
    place = list(csv.DictReader((model_dir / "placements.csv").open()))
    step = {r["placement"]: float(r["step_time"]) for r in place if int(r["local_bsz"]) == bsz}
    out: dict[int, float] = {}
    for n in range(2, 9):
        splits = [f"{a}{n - a}" for a in range(1, n // 2 + 1) if n - a <= 4]
        rates = [n * bsz / step[s] for s in splits if s in step]
        if rates:
            out[n] = round(max(rates) / (bsz / step["1"]), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=shared_data())
    ap.add_argument("--out", type=Path, default=ROOT / "lyra_ray/model/data/curves.json")
    args = ap.parse_args()
    out: dict[str, object] = {
        "source": "Pollux/AdaptDL OSDI'21 profiles (Apache-2.0), "
        "data/pollux/profiles/<model>/{placements,scalability}.csv",
        "derived_by": "benchmarks/derive_curves.py",
        "method": "speedup(n) = samples/s with n workers / with 1 worker, fixed local batch",
    }
    curves: dict[str, object] = {}
    for m in MODELS:
        bsz, points = curve(args.data / "pollux" / "profiles" / m)
        two = spread(args.data / "pollux" / "profiles" / m, bsz)
        curves[m] = {
            "local_bsz": bsz,
            "speedup": {str(n): s for n, s in points.items()},
            "spread": {str(n): s for n, s in two.items()},
        }
    out["curves"] = curves
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")
    for m, c in curves.items():
        assert isinstance(c, dict)
        print(m, c["speedup"])


if __name__ == "__main__":
    main()
