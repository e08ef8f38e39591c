"""Fit the expert-time roofline (``moe_serving/expert_time.py``) to the measured H200 points.

Reads ``moe_expert_forward`` of ``../shared/data/gpu/h200.json`` (or ``$LYRA_SHARED_DATA``):
one SwiGLU expert's bf16 forward time against its token count, for two shapes. Fits the
model's four constants (bandwidth, GEMM FLOP/s, launch floor, overlap exponent) by least
squares on log time over both shapes at once, prints every point's predicted / measured
time under the fitted constants and under the ones the module ships, and a hold-out check:
constants fitted to the Mixtral-sized shape alone (floor fixed, the large shape never
reaches it) predicting the small shape.

Run: ``.venv/bin/python benchmarks/moe_expert_fit.py`` -> benchmarks/results/moe_expert_fit.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

from lyra_ray.moe_serving import expert_time as et  # noqa: E402

SHAPES = {
    "mixtral-8x7b expert (4096x14336)": (4096, 14336),
    "small expert (1024x4096)": (1024, 4096),
}
SCALE = np.array([1e12, 1e12, 1e-6, 1.0])  # fit in TB/s, TFLOP/s, us, 1


def data_file() -> Path:
    env = os.environ.get("LYRA_SHARED_DATA")
    return (Path(env) if env else ROOT / ".." / "shared" / "data") / "gpu" / "h200.json"


def points(raw: dict[str, Any]) -> list[tuple[str, int, int, int, float]]:
    """(shape name, dim, hidden, tokens, measured seconds) of every measured point."""
    out = []
    for name, (dim, hidden) in SHAPES.items():
        for p in raw[name]:
            out.append((name, dim, hidden, int(p["tokens"]), float(p["s"])))
    return out


def predict(c: et.ExpertRoofline, pts: list[tuple[str, int, int, int, float]]) -> np.ndarray:
    et.GPUS["_fit"] = c  # the module's own formula, evaluated with these constants
    try:
        return np.array([et.expert_time_s(d, h, t, "_fit") for _, d, h, t, _ in pts])
    finally:
        del et.GPUS["_fit"]


def constants(x: np.ndarray, source: str) -> et.ExpertRoofline:
    bw, fl, floor, p = (x * SCALE).tolist()
    return et.ExpertRoofline(bw, fl, floor, p, source)


def fit(
    pts: list[tuple[str, int, int, int, float]], floor_us: float | None = None
) -> et.ExpertRoofline:
    """Least squares on log time; ``floor_us`` fixes the floor (hold-out fit)."""
    measured = np.array([p[4] for p in pts])

    def full(x: np.ndarray) -> np.ndarray:
        return x if floor_us is None else np.array([x[0], x[1], floor_us, x[2]])

    def resid(x: np.ndarray) -> np.ndarray:
        pred = predict(constants(full(x), "fit"), pts)
        r: np.ndarray = np.log(pred / measured)
        return r

    x0 = np.array([3.5, 700.0, 65.0, 3.0])
    lo, hi = np.array([0.5, 50.0, 1.0, 1.0]), np.array([20.0, 3000.0, 1000.0, 20.0])
    if floor_us is not None:
        x0, lo, hi = x0[[0, 1, 3]], lo[[0, 1, 3]], hi[[0, 1, 3]]
    r = least_squares(resid, x0, bounds=(lo, hi))
    return constants(full(r.x), "fit")


def table(
    c: et.ExpertRoofline, pts: list[tuple[str, int, int, int, float]]
) -> list[dict[str, Any]]:
    pred = predict(c, pts)
    return [
        {
            "shape": name,
            "tokens": t,
            "measured_us": s * 1e6,
            "predicted_us": float(p) * 1e6,
            "error": float(p / s - 1.0),
        }
        for (name, _, _, t, s), p in zip(pts, pred, strict=True)
    ]


def worst(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {name: max(abs(r["error"]) for r in rows if r["shape"] == name) for name in SHAPES}


def as_dict(c: et.ExpertRoofline) -> dict[str, float]:
    return {
        "bandwidth_TBps": c.bandwidth / 1e12,
        "flops_TFLOPs": c.flops / 1e12,
        "floor_us": c.floor_s * 1e6,
        "overlap": c.overlap,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "moe_expert_fit.json"))
    args = ap.parse_args(argv)
    path = data_file()
    if not path.exists():
        print(f"moe_expert_fit.py: {path} not found (set LYRA_SHARED_DATA)", file=sys.stderr)
        return 2
    raw = json.loads(path.read_text())["moe_expert_forward"]
    pts = points(raw)
    fitted = fit(pts)
    shipped = et.H200
    rows = table(shipped, pts)
    mix = [p for p in pts if p[1] == 4096]
    held = fit(mix, floor_us=shipped.floor_s * 1e6)
    held_rows = [r for r in table(held, pts) if r["shape"] != mix[0][0]]
    print(f"{'shape':34} {'tokens':>6} {'measured us':>12} {'model us':>10} {'error':>7}")
    for r in rows:
        print(
            f"{r['shape']:34} {r['tokens']:6d} {r['measured_us']:12.1f} "
            f"{r['predicted_us']:10.1f} {r['error']:+7.1%}"
        )
    print("fitted now:", {k: round(v, 3) for k, v in as_dict(fitted).items()})
    print("shipped   :", {k: round(v, 3) for k, v in as_dict(shipped).items()})
    for name, e in worst(rows).items():
        print(f"worst error, shipped constants, {name}: {e:.1%}")
    held_worst = max(abs(r["error"]) for r in held_rows)
    print(f"hold-out: fitted to 4096x14336 only, worst error on 1024x4096: {held_worst:.1%}")
    out = {
        "data": str(path.name),
        "measured": "2026-11-26, NVIDIA H200 (141 GB HBM3e), torch 2.11 (CUDA 13)",
        "model": "max(floor, (t_w^p + t_c^p)^(1/p) + t_a); see moe_serving/expert_time.py",
        "fitted": as_dict(fitted),
        "shipped": as_dict(shipped),
        "constants": 4,
        "points": rows,
        "worst_error": worst(rows),
        "holdout": {
            "fit_on": mix[0][0],
            "constants": as_dict(held),
            "worst_error_other_shape": held_worst,
            "points": held_rows,
        },
        "examples_us": {
            f"{d}x{h}": {str(t): et.expert_time_s(d, h, t) * 1e6 for t in (1, 64, 512, 4096)}
            for d, h in ((7168, 2048), (4096, 14336), (1024, 4096))
        },
    }
    out_path = Path(args.json)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
