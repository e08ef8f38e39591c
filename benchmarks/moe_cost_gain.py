"""Ideal gain of popularity-based expert replicas over uniform ones under the H200 expert-time
model (``moe_serving/expert_time.py``), on DeepSeek-V3's real expert loads.

Setup: each ``deepseek_v3_expert_load_*.json`` (58 MoE layers x 256 experts), 32 GPUs with 9
replica slots each (288 replicas: one per expert plus 32 spare, DeepSeek's redundant-expert
setting). A step routes ``batch`` tokens through every layer, each to 8 experts (top-8, as
DeepSeek-V3): ``8 x batch`` expert-token pairs per layer, drawn multinomially from the
layer's load shares (``--samples`` draws per layer). An expert's tokens split evenly over
its replicas; a replica's time is ``expert_time_s`` of its tokens (0 when it gets none); a
layer's step time is the max over GPUs of the sum over its replicas. Plans, all from the
same file's loads (an ideal: the plan knows the loads it is judged on):

- uniform: one replica per expert, experts 8g..8g+7 on GPU g (plain expert parallelism);
- ours: Lina's planner (``plan_lina``: token-balancing counts and packing, 288 replicas);
- EPLB: DeepSeek's EPLB, global policy (``plan_eplb``; the same token objective);
- time-aware: ``plan_for_batch`` told the batch size: minimises the predicted step time
  under the expert-time model, and may leave slots unused.

Gain = uniform's mean layer step time / the plan's. Also reported: the token-only gain
(uniform's busiest-GPU tokens / the plan's), the objective both Lina and EPLB optimise.

Run: ``.venv/bin/python benchmarks/moe_cost_gain.py`` -> benchmarks/results/moe_cost_gain.json
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

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402

from lyra_ray.moe_serving.eplb import plan_eplb  # noqa: E402
from lyra_ray.moe_serving.expert_time import ExpertCost, flat_until  # noqa: E402
from lyra_ray.moe_serving.plan_io import read_load_file  # noqa: E402
from lyra_ray.moe_serving.planner import (  # noqa: E402
    Placement,
    device_loads,
    plan_for_batch,
    plan_lina,
    shares,
    step_times,
)

GPUS, SLOTS, TOP_K = 32, 9, 8
BATCHES = {"decode": (128, 2048), "prefill": (32_768, 262_144)}
"""Tokens per step of the whole 32-GPU group (4 to 8,192 per GPU); routed tokens per expert
on average, 8 x batch / 256: decode 4 and 64, prefill 1,024 and 8,192."""
SHAPES = {"deepseek-v3 (7168x2048)": (7168, 2048), "mixtral-8x7b (4096x14336)": (4096, 14336)}


def data_dir() -> Path:
    env = os.environ.get("LYRA_SHARED_DATA")
    return Path(env) if env else ROOT / ".." / "shared" / "data"


def uniform_plan(load: npt.NDArray[np.float64]) -> Placement:
    layers, experts = load.shape
    rexp = np.tile(np.arange(experts, dtype=np.int64), (layers, 1))
    rdev = rexp * GPUS // experts
    return Placement(rexp, rdev, GPUS, SLOTS, load)


def _ranks(rexp: npt.NDArray[np.int64], experts: int) -> npt.NDArray[np.int64]:
    """Each replica's index among its expert's replicas [L, R]."""
    out = np.empty_like(rexp)
    for i, row in enumerate(rexp):
        order = np.argsort(row, kind="stable")
        first = np.concatenate(([0], np.cumsum(np.bincount(row, minlength=experts))[:-1]))
        out[i, order] = np.arange(row.size) - first[row[order]]
    return out


def sampled_step_s(
    plan: Placement, counts: npt.NDArray[np.int64], cost: ExpertCost
) -> npt.NDArray[np.float64]:
    """Step time [S, L] of every sampled layer step (``counts`` [S, L, E] tokens per expert)."""
    layers, experts = plan.planned_load.shape
    k = plan.counts  # [L, E]
    rexp = plan.replica_expert
    n = np.take_along_axis(counts, np.broadcast_to(rexp, (counts.shape[0], *rexp.shape)), 2)
    kr = np.take_along_axis(k, rexp, 1)[None]
    tok = n // kr + (_ranks(rexp, experts)[None] < n % kr)
    t = cost(tok)  # [S, L, R]
    onehot = np.zeros((layers, rexp.shape[1], plan.devices))
    onehot[np.arange(layers)[:, None], np.arange(rexp.shape[1])[None], plan.replica_device] = 1
    out: npt.NDArray[np.float64] = np.einsum("slr,lrg->slg", t, onehot).max(2)
    return out


def busiest_tokens(load: npt.NDArray[np.float64], plan: Placement) -> float:
    return float(device_loads(load, plan).max(1).mean())


def one(
    path: Path, regime: str, samples: int, shapes: dict[str, tuple[int, int]], seed: int
) -> list[dict[str, Any]]:
    load, layers = read_load_file(path)
    base = {
        "uniform": uniform_plan(load),
        "ours": plan_lina(load, GPUS * SLOTS, GPUS, SLOTS),
        "eplb": plan_eplb(load, GPUS * SLOTS, GPUS),
    }
    tokens_base = busiest_tokens(load, base["uniform"])
    rng = np.random.default_rng(seed)
    rows = []
    for shape, (dim, hidden) in shapes.items():
        cost = ExpertCost(dim, hidden, "h200")
        for batch in BATCHES[regime]:
            pairs = TOP_K * batch
            counts = np.stack(
                [rng.multinomial(pairs, s, size=samples) for s in shares(load)], axis=1
            )
            t0 = time.perf_counter()
            plans = {**base, "time_aware": plan_for_batch(load, GPUS * SLOTS, GPUS, pairs, cost)}
            plan_s = time.perf_counter() - t0
            step = {a: float(sampled_step_s(p, counts, cost).mean()) for a, p in plans.items()}
            pred = {a: float(step_times(p, pairs, cost).mean()) for a, p in plans.items()}
            rows.append(
                {
                    "file": path.name.removeprefix("deepseek_v3_expert_load_").removesuffix(
                        ".json"
                    ),
                    "regime": regime,
                    "expert": shape,
                    "flat_until_tokens": flat_until(dim, hidden),
                    "batch_tokens": batch,
                    "tokens_per_expert": pairs / load.shape[1],
                    "moe_layers": len(layers),
                    "step_us": {a: v * 1e6 for a, v in step.items()},
                    "predicted_step_us": {a: v * 1e6 for a, v in pred.items()},
                    "gain": {a: step["uniform"] / v for a, v in step.items() if a != "uniform"},
                    "token_gain": {
                        a: tokens_base / busiest_tokens(load, p)
                        for a, p in plans.items()
                        if a != "uniform"
                    },
                    "time_aware_replicas": int(plans["time_aware"].replica_expert.shape[1]),
                    "time_aware_plan_s": plan_s,
                }
            )
            r = rows[-1]
            print(
                f"{r['file']:22} {shape:26} batch {batch:>7} "
                f"({r['tokens_per_expert']:>6.0f}/expert): "
                f"uniform {step['uniform'] * 1e6:8.1f} us, "
                + ", ".join(f"{a} {g:.3f}x" for a, g in r["gain"].items())
                + f" (time-aware uses {r['time_aware_replicas']} replicas)"
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=32, help="sampled steps per layer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "moe_cost_gain.json"))
    args = ap.parse_args(argv)
    files = sorted((data_dir() / "moe").glob("deepseek_v3_expert_load_*.json"))
    if not files:
        print(
            f"moe_cost_gain.py: no deepseek_v3_expert_load_*.json under {data_dir() / 'moe'} "
            "(set LYRA_SHARED_DATA)",
            file=sys.stderr,
        )
        return 2
    rows = []
    for f in files:
        regime = "decode" if "decode" in f.name else "prefill"
        rows += one(f, regime, args.samples, SHAPES, args.seed)
    out = {
        "setup": {
            "gpus": GPUS,
            "slots": SLOTS,
            "replicas": GPUS * SLOTS,
            "experts": 256,
            "top_k": TOP_K,
            "samples": args.samples,
            "seed": args.seed,
            "batches": BATCHES,
            "cost_model": "lyra_ray.moe_serving.expert_time, H200 constants",
            "command": ".venv/bin/python benchmarks/moe_cost_gain.py",
        },
        "rows": rows,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
