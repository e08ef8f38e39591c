"""lyra-ray's simulator against Gavel's own, setting by setting.

Reads Gavel's figures from ``tests/data/gavel_reference.json`` (made by
``scripts/gavel_reference.py``, which runs Gavel's simulator), replays each setting
through lyra-ray's simulator (the real core, round mechanism and SimRuntime, as
``lyra simulate`` does) and writes ``benchmarks/results/gavel_fidelity.json``: average,
median and p95 JCT side by side, the ratio, and whether the setting is held by the
tests (within 5 %) or carries a written reason (``tests/data/gavel_deviations.json``).

    .venv/bin/python benchmarks/gavel_fidelity.py [--only KEY ...] [--max-wall 600]

The short settings (``max_min_fairness.trace``, seconds each) are also run by
``tests/sim/test_gavel_reference.py``; the generated 2,000- and 3,000-job traces take
minutes per policy, so they live here (and in that test behind ``LYRA_GAVEL_LONG=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray.model.spec import parse_cluster  # noqa: E402
from lyra_ray.model.throughput import load_gavel_throughputs  # noqa: E402
from lyra_ray.policies.base import get_policy  # noqa: E402
from lyra_ray.sim.simulator import Simulator  # noqa: E402
from lyra_ray.sim.traces import read_gavel_trace  # noqa: E402

SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT.parent / "shared" / "data")) / "gavel"
REFERENCE = ROOT / "tests" / "data" / "gavel_reference.json"
DEVIATIONS = ROOT / "tests" / "data" / "gavel_deviations.json"
OUT = ROOT / "benchmarks" / "results" / "gavel_fidelity.json"
TOLERANCE = 0.05


def load_reference() -> dict[str, dict[str, Any]]:
    """Gavel's settings that produced a figure (failed runs are listed, not compared)."""
    data = json.loads(REFERENCE.read_text())
    return {k: v for k, v in data["settings"].items() if "avg_jct_s" in v}


def cluster_arg(cluster: str) -> str:
    """Gavel's ``v100:p100:k80`` counts as lyra-ray's ``v100=..,p100=..,k80=..``."""
    v, p, k = cluster.split(":")
    return f"v100={v},p100={p},k80={k}"


def simulate(entry: dict[str, Any]) -> dict[str, Any]:
    """One of Gavel's settings through lyra-ray's simulator (seed 0, 360 s rounds)."""
    model = load_gavel_throughputs(SHARED / "simulation_throughputs.json")
    specs = read_gavel_trace(SHARED / "traces" / entry["trace"], known_job_types=model.job_types)
    nodes = parse_cluster(cluster_arg(entry["cluster"]), 1)
    window = tuple(entry["window"]) if entry.get("window") else None
    sim = Simulator(nodes, get_policy(entry["policy"]), model, round_s=360.0)
    res = sim.run(specs, window=window)  # type: ignore[arg-type]
    s = res.summary
    return {
        "avg_jct_s": s["avg_jct_s"],
        "median_jct_s": s["median_jct_s"],
        "p95_jct_s": s["p95_jct_s"],
        "jobs": s["window_jobs"],
        "wall_s": round(s["wall_s"], 2),
    }


def compare(key: str, gavel: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    reasons = json.loads(DEVIATIONS.read_text()) if DEVIATIONS.exists() else {}
    row: dict[str, Any] = {
        "gavel": {k: gavel[k] for k in ("avg_jct_s", "median_jct_s", "p95_jct_s")}
    }
    row["ours"] = ours
    for stat in ("avg_jct_s", "median_jct_s", "p95_jct_s"):
        row[f"{stat[:-6]}_ratio"] = round(ours[stat] / gavel[stat], 4)
    row["within_5pct"] = abs(row["avg_ratio"] - 1) <= TOLERANCE
    if key in reasons:
        row["reason"] = reasons[key]["reason"]
    return row


def markdown(results: dict[str, Any]) -> str:
    """The results as the table docs/gavel.md shows."""
    lines = [
        "| trace | cluster | policy | Gavel avg JCT (s) | ours (s) | avg | median | p95 | |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for key in sorted(results["settings"]):
        r = results["settings"][key]
        trace, cluster, policy = key.split("|")
        mark = "within 5 %" if r["within_5pct"] else ("reason" if "reason" in r else "OUT")
        lines.append(
            f"| {trace} | {cluster} | `{policy}` | {r['gavel']['avg_jct_s']:,.0f} | "
            f"{r['ours']['avg_jct_s']:,.0f} | {r['avg_ratio']:.3f} | {r['median_ratio']:.3f} | "
            f"{r['p95_ratio']:.3f} | {mark} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", help="reference keys (TRACE|CLUSTER|POLICY)")
    ap.add_argument("--skip-long", action="store_true", help="max_min_fairness.trace only")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--markdown", action="store_true", help="print --out as a table and stop")
    args = ap.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    ref = load_reference()
    keys = args.only or sorted(ref)
    if args.skip_long:
        keys = [k for k in keys if k.startswith("max_min_fairness|")]
    out: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    rows = out.setdefault("settings", {})
    for key in keys:
        t0 = time.perf_counter()
        rows[key] = compare(key, ref[key], simulate(ref[key]))
        r = rows[key]
        print(
            f"{key}: gavel {r['gavel']['avg_jct_s']:.0f} ours {r['ours']['avg_jct_s']:.0f} "
            f"({r['avg_ratio']:.3f}; median {r['median_ratio']:.3f}, p95 {r['p95_ratio']:.3f}) "
            f"{time.perf_counter() - t0:.1f} s",
            flush=True,
        )
        held = [k for k, v in rows.items() if v["within_5pct"]]
        out["summary"] = {
            "settings": len(rows),
            "within_5pct": len(held),
            "outside_with_reason": sorted(
                k for k, v in rows.items() if not v["within_5pct"] and "reason" in v
            ),
            "outside_without_reason": sorted(
                k for k, v in rows.items() if not v["within_5pct"] and "reason" not in v
            ),
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
