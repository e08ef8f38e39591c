"""Lyra's guards against demand noise, side by side with Basic (docs/lyra.md).

The same workload as ``benchmarks/lyra_eval.py`` (a Philly window, seed 0, the same
cluster and diurnal serving demand); Basic, Lyra as evaluated (``lend_after_s=1800``, the
4-h rule) and Lyra with each guard changed or removed. Writes
``benchmarks/results/lyra_guards.json``: mean queuing, mean JCT, preemption ratio and
on-loan utilisation per window and variant.

    .venv/bin/python benchmarks/lyra_guards.py [--windows 12000,19000]   # ~8 min here
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import lyra_eval as E
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.sim.serving import demand_series, diurnal
from lyra_ray.sim.simulator import Simulator

log = logging.getLogger("lyra_guards")
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "basic": ("basic", {}),
    "lyra": ("lyra", E.LYRA),
    "lend_after_600": ("lyra", {**E.LYRA, "lend_after_s": 600.0}),
    "no_4h_rule": ("lyra", {**E.LYRA, "loan_max_remaining_s": None}),
    "no_guard": ("lyra", {"reserve_fraction": 0.0, "loan_max_remaining_s": None}),
}
KEYS = ("avg_queue_s", "avg_jct_s", "preemption_ratio", "on_loan_utilisation")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", default="12000,19000")
    ap.add_argument("--out", type=Path, default=E.ROOT / "benchmarks/results/lyra_guards.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    wl = argparse.Namespace(
        cluster_id="6214e9", elastic_share=0.5, gpus_per_node=8, infer_nodes=16, jobs=1000,
        max_duration_h=24.0, resize_overhead=60.0, t4_speed=0.4, train_nodes=12,
    )  # fmt: skip
    philly = E.shared_data() / "pollux" / "philly.csv"
    out: dict[str, Any] = {"settings": vars(wl), "variants": dict(VARIANTS)}
    for start in (int(w) for w in args.windows.split(",")):
        raw = E.philly_window(philly, wl.cluster_id, start, wl.jobs)
        demand = demand_series(diurnal(wl.infer_nodes, raw[-1][0] + 3 * 86_400.0, seed=0))
        for name, (policy, kwargs) in VARIANTS.items():
            jobs = E.make_jobs(raw, wl, 0, wl.t4_speed)
            sim = Simulator(
                E.cluster(wl),
                get_policy(policy, **kwargs),
                SpecThroughputs(),
                resize_overhead_s=wl.resize_overhead,
                serving_demand=demand,
            )
            t0 = time.perf_counter()
            s = sim.run(jobs).summary
            out.setdefault("runs", {})[f"{start}/{name}"] = {k: s.get(k) for k in KEYS}
            took = time.perf_counter() - t0
            log.info("%d %s %s (%.0f s)", start, name, out["runs"][f"{start}/{name}"], took)
    args.out.write_text(json.dumps(out, indent=1))
    log.info("wrote %s", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
