"""Placing a layer's tokens on expert replicas before its gate's counts are final: counted
loads vs Lina's path-based estimate vs an oracle, across a traffic shift (issue 31, item 3).

The routing: ``moe_serving/route_stream.py`` drives the synthetic MoE model (``model.py``:
4 layers, 8 experts, top-2, skew 1.0) at gate correlation 0, 0.5 and 0.9 with batches of
256 sequences x 32 tokens (8,192 tokens, 16,384 expert picks per layer); each batch draws
its topic mix around a base mix that favours topic 0, and from batch 60 of 120 topic 2.

Per batch and layer l >= 1 (layer 0 has no path; every method would use the counted load),
before the gate of l runs, each method estimates l's load [E]:

- counted: the decayed counted load of l over past batches (``OnlineRouteEstimator.counted``);
  ``counted-fast`` forgets faster (decay 0.5), to show the gap is not a slow baseline's;
- path: the sum over the batch's tokens of P(experts at l | top-1 expert at l-1), from the
  same decayed counts (``estimate``); ``path-2`` conditions on layers l-2 and l-1;
- oracle: the true counts of l (it knows each token's next-layer experts).

The estimator folds a batch in only after the batch (``decay`` 0.8 per batch). From its
estimate a method gives the layer's 16 replicas to experts by the divisor method
(``packing.apportion``; every expert keeps one), i.e. the replicas are set up (or prefetched)
and each replica expects ``estimate[e] / counts[e]`` tokens. Then the gate's actual counts
``a`` arrive:

- right replica: the share of picks that land within what the method prepared for their
  expert, ``sum_e min(a[e], est[e]) / sum_e a[e]`` (estimate scaled to the batch's picks;
  the rest overflow the replicas planned for them). The oracle scores 1.
- token top-1: the share of tokens whose predicted top expert (argmax of the method's
  per-token estimate; one guess for all tokens for counted) is their actual top-1.
- layer time: ``bottleneck.request_times`` of the actual counts under the method's replica
  counts: an expert's tokens split evenly over its replicas, the layer ends with its slowest
  chunk, a chunk costs ``expert_time.ExpertCost(4096, 14336, "h200")`` of its tokens (the
  H200-fitted roofline of a Mixtral-8x7B expert). No queueing between batches: each layer
  is timed on idle devices, so the number is the plan's own effect.

Reported over batches 5.. (the first five warm the estimator), per seed and as the mean over
seeds 0, 1, 2: the pooled right-replica share, the same for the 10 batches after the shift,
token top-1, the p95 and mean layer time, the p95 before the shift and over the 10 batches
after it, and p95 / the oracle's p95.

Run: ``.venv/bin/python benchmarks/moe_path_estimation.py`` (2 min 13 s on the shared 2-core
host, 26 Nov 2026; progress on stderr every 30 batches)
-> benchmarks/results/moe_path_estimation.json, and the table in docs/moe.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
import torch  # noqa: E402

from lyra_ray.moe_serving.bottleneck import request_times  # noqa: E402
from lyra_ray.moe_serving.expert_time import ExpertCost  # noqa: E402
from lyra_ray.moe_serving.model import MoEConfig, MoEModel  # noqa: E402
from lyra_ray.moe_serving.packing import apportion  # noqa: E402
from lyra_ray.moe_serving.route_estimator import OnlineRouteEstimator  # noqa: E402
from lyra_ray.moe_serving.route_stream import (  # noqa: E402
    StreamConfig,
    path_information,
    route_stream,
)

COMMAND = ".venv/bin/python benchmarks/moe_path_estimation.py"
CORRELATIONS = (0.0, 0.5, 0.9)
METHODS = ("counted", "counted-fast", "path", "path-2", "oracle")
LAYERS, EXPERTS, TOP_K, BUDGET = 4, 8, 2, 16
SHAPE = (4096, 14336)
DECAY, FAST_DECAY, MIN_COUNT = 0.8, 0.5, 4.0
WARMUP, AFTER = 5, 10
Floats = npt.NDArray[np.float64]


def _estimates(
    ests: dict[str, OnlineRouteEstimator], routes: npt.NDArray[np.int64], layer: int
) -> dict[str, tuple[Floats, npt.NDArray[np.int64]]]:
    """Each method's load estimate [E] of ``layer`` and its per-token top guess [N]."""
    n = routes.shape[1]
    actual = np.bincount(routes[layer].ravel(), minlength=EXPERTS).astype(np.float64)
    out = {}
    for name in ("counted", "counted-fast"):
        counted = ests[name].counted(layer, n)
        out[name] = (counted, np.full(n, int(np.argmax(counted)), dtype=np.int64))
    for name in ("path", "path-2"):
        est = ests[name]
        per_token = est.expected_picks(layer, routes[:layer])
        out[name] = (per_token.sum(0), np.argmax(per_token, axis=1).astype(np.int64))
    out["oracle"] = (actual, routes[layer, :, 0])
    return out


def run_stream(corr: float, batches: int, shift_at: int, seed: int) -> dict[str, Any]:
    """One seeded stream at gate correlation ``corr``: every method's summary."""
    mcfg = MoEConfig(layers=LAYERS, experts=EXPERTS, top_k=TOP_K, correlation=corr, seed=seed)
    scfg = StreamConfig(batches=batches, shift_at=shift_at, seed=seed, model=mcfg)
    cost = ExpertCost(*SHAPE, gpu="h200")
    est1 = OnlineRouteEstimator(LAYERS, EXPERTS, history=1, decay=DECAY, min_count=MIN_COUNT)
    ests = {
        "counted": est1,
        "counted-fast": OnlineRouteEstimator(LAYERS, EXPERTS, history=0, decay=FAST_DECAY),
        "path": est1,
        "path-2": OnlineRouteEstimator(LAYERS, EXPERTS, 2, decay=DECAY, min_count=MIN_COUNT),
    }
    rows: dict[str, dict[str, list[float]]] = {
        m: {"right": [], "top1": [], "time_s": [], "batch": []} for m in METHODS
    }
    info: list[dict[str, float]] = []
    t0 = time.monotonic()
    for b, routes in enumerate(route_stream(scfg, MoEModel(mcfg))):
        if b >= WARMUP:
            for layer in range(1, LAYERS):
                actual = np.bincount(routes[layer].ravel(), minlength=EXPERTS).astype(float)
                for m, (load, guess) in _estimates(ests, routes, layer).items():
                    scaled = load * actual.sum() / max(load.sum(), 1e-12)
                    counts = apportion(scaled[None], BUDGET)
                    t = request_times(actual[None, None], counts, cost=cost)[0]
                    r = rows[m]
                    r["right"].append(float(np.minimum(actual, scaled).sum() / actual.sum()))
                    r["top1"].append(float(np.mean(guess == routes[layer, :, 0])))
                    r["time_s"].append(float(t))
                    r["batch"].append(b)
        info.append(path_information(routes))
        for est in {id(e): e for e in ests.values()}.values():
            est.observe(routes)
        if (b + 1) % 30 == 0:
            sys.stderr.write(
                f"  correlation {corr}, seed {seed}: batch {b + 1}/{batches} "
                f"({time.monotonic() - t0:.0f} s)\n"
            )
    return {
        "seed": seed,
        "path_information": {
            k: float(np.mean([i[k] for i in info])) for k in ("from_path", "marginal")
        },
        "methods": {m: summarise(rows[m], shift_at) for m in METHODS},
    }


def run_correlation(corr: float, batches: int, shift_at: int, seeds: list[int]) -> dict[str, Any]:
    """All seeds at ``corr``: per seed, and the mean over seeds of every number (``p95_vs_oracle``
    with its range over seeds)."""
    runs = [run_stream(corr, batches, shift_at, s) for s in seeds]
    mean: dict[str, dict[str, Any]] = {}
    for m in METHODS:
        keys = runs[0]["methods"][m].keys()
        mean[m] = {k: float(np.mean([r["methods"][m][k] for r in runs])) for k in keys}
        ratio = [r["methods"][m]["p95_us"] / r["methods"]["oracle"]["p95_us"] for r in runs]
        mean[m]["p95_vs_oracle"] = float(np.mean(ratio))
        mean[m]["p95_vs_oracle_range"] = [float(min(ratio)), float(max(ratio))]
    info = {
        k: float(np.mean([r["path_information"][k] for r in runs]))
        for k in ("from_path", "marginal")
    }
    return {"correlation": corr, "path_information": info, "methods": mean, "seeds": runs}


def summarise(r: dict[str, list[float]], shift_at: int) -> dict[str, float]:
    batch = np.asarray(r["batch"])
    after = (batch >= shift_at) & (batch < shift_at + AFTER)
    before = batch < shift_at
    right, top1, t = (np.asarray(r[k]) for k in ("right", "top1", "time_s"))
    return {
        "right_share": float(right.mean()),
        "right_share_after_shift": float(right[after].mean()),
        "token_top1": float(top1.mean()),
        "p95_us": float(np.percentile(t, 95) * 1e6),
        "mean_us": float(t.mean() * 1e6),
        "p95_after_shift_us": float(np.percentile(t[after], 95) * 1e6),
        "p95_before_shift_us": float(np.percentile(t[before], 95) * 1e6),
        "samples": int(t.size),
    }


def render(data: dict[str, Any]) -> str:
    """docs/moe.md's table (registered in ``benchmarks/docs_tables.py``): means over seeds."""
    s = data["setup"]
    seeds = ", ".join(str(x) for x in s["seeds"])
    lines = [
        f"{s['layers']} layers x {s['experts']} experts, top-{s['top_k']}, {s['budget']} "
        f"replicas per layer, {s['tokens_per_batch']:,} tokens per batch, {s['batches']} "
        f"batches with the topic shift at batch {s['shift_at']}; expert {s['expert_shape']} on "
        f"the H200 model; decay {s['decay']} per batch (counted-fast: {s['fast_decay']}). "
        f"Layers >= 1, batches >= {s['warmup']}; "
        f'"after shift" = the {s["after"]} batches from the shift on. Mean over seeds {seeds} '
        f"(p95 vs oracle: mean, and its range over seeds). Command: `{s['command']}`.",
        "",
        "| gate correlation (next top-1 expert guessed right: from the previous one / from "
        "popularity) | estimate | right replica | right replica, after shift | token top-1 | "
        "p95 layer time | p95 before shift | p95 after shift | p95 vs oracle |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in data["correlations"]:
        pi = c["path_information"]
        for m, v in c["methods"].items():
            lo, hi = v["p95_vs_oracle_range"]
            lines.append(
                f"| {c['correlation']:.1f} ({pi['from_path']:.2f} / {pi['marginal']:.2f}) | {m} | "
                f"{v['right_share']:.3f} | {v['right_share_after_shift']:.3f} | "
                f"{v['token_top1']:.2f} | {v['p95_us']:,.0f} us | "
                f"{v['p95_before_shift_us']:,.0f} us | {v['p95_after_shift_us']:,.0f} us | "
                f"{v['p95_vs_oracle']:.3f}x "
                f"({lo:.3f}-{hi:.3f}) |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", type=int, default=120)
    ap.add_argument("--shift-at", type=int, default=60)
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    ap.add_argument(
        "--json", default=str(ROOT / "benchmarks" / "results" / "moe_path_estimation.json")
    )
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite docs/moe.md's table")
    args = ap.parse_args(argv)
    if args.batches <= WARMUP or not WARMUP <= args.shift_at < args.batches:
        ap.error(f"--batches must be > {WARMUP} and --shift-at in [{WARMUP}, batches)")
    try:
        seeds = [int(x) for x in args.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
    torch.set_num_threads(1)  # the host is shared; one thread is as fast for this small model
    t0 = time.monotonic()
    out_rows = []
    for corr in CORRELATIONS:
        sys.stderr.write(f"correlation {corr}\n")
        out_rows.append(run_correlation(corr, args.batches, args.shift_at, seeds))
    scfg = StreamConfig()
    out = {
        "setup": {
            "layers": LAYERS,
            "experts": EXPERTS,
            "top_k": TOP_K,
            "budget": BUDGET,
            "tokens_per_batch": scfg.seqs * scfg.seq,
            "batches": args.batches,
            "shift_at": args.shift_at,
            "topics": {"before": list(scfg.before), "after": list(scfg.after)},
            "dirichlet_alpha": scfg.alpha,
            "seeds": seeds,
            "decay": DECAY,
            "fast_decay": FAST_DECAY,
            "min_count": MIN_COUNT,
            "warmup": WARMUP,
            "after": AFTER,
            "expert_shape": f"{SHAPE[0]}x{SHAPE[1]}",
            "cost_model": "lyra_ray.moe_serving.expert_time, H200 constants",
            "command": COMMAND,
            "wall_s": round(time.monotonic() - t0, 1),
        },
        "correlations": out_rows,
    }
    path = Path(args.json)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    sys.stderr.write(f"wrote {path}\n")
    if not args.no_docs:
        from benchmarks.docs_tables import table

        table("moe-path-estimation").write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
