"""Cross-validation of the interference predictor on the measured H200 pairs.

Why: a predicted pair rate is only worth filling in if it is closer to what a
measurement would say than the cheaper guesses are. Each fold hides whole pairs, both
sides together (share_ij and share_ji at once; a self-pair is one entry), exactly as a
pair nobody measured is hidden, and scores the hidden shares of:

* ``predictor``: :func:`lyra_ray.model.interference.fit_interference`, clipped to (0, 1];
* ``additive``: ``mu + a_i + b_j`` by least squares, as it is (unclipped);
* ``additive, clipped``: the same, clipped as the predictor is (what clipping alone does);
* ``mean share``: the mean of the training shares for every pair;
* ``catalogue seed``: ``lyra_ray.model.catalogue.KEEP_WHEN_SHARED[i]`` for job i beside anyone
  (what the scheduler assumes before it has measured anything; no fit).

Targets are the measured shares as they are, some above 1 by noise; the MAE against
targets clipped to 1 is reported beside it. Schemes: leave-one-pair-out over all pairs,
and repeated random K-fold over pairs (5 folds x 20 fixed seeds). Writes
``benchmarks/results/interference_cv.json`` (rendered into docs/profiling.md by
``benchmarks/docs_tables.py``).

    .venv/bin/python benchmarks/interference_cv.py     # a few seconds on 2 cores
"""

from __future__ import annotations

import ast
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lyra_ray.model.catalogue import KEEP_WHEN_SHARED  # noqa: E402
from lyra_ray.model.interference import (  # noqa: E402
    InterferenceModel,
    fit_additive,
    fit_interference,
    observed_shares,
    predict_share,
)

DATA = "lyra_ray/model/data/h200_throughputs.json"
GPU = "h200"
OUT = ROOT / "benchmarks" / "results" / "interference_cv.json"
FOLDS = 5
SEEDS = range(20)
COMMAND = ".venv/bin/python benchmarks/interference_cv.py"

Shares = Mapping[tuple[str, str], float]
Predict = Callable[[Shares], Callable[[str, str], float]]


def _model(fit: Callable[[Shares], InterferenceModel], clip: bool) -> Predict:
    def train(shares: Shares) -> Callable[[str, str], float]:
        m = fit(shares)
        return (lambda i, j: predict_share(m, i, j)) if clip else m.share

    return train


def _mean(shares: Shares) -> Callable[[str, str], float]:
    mu = statistics.fmean(shares.values())
    return lambda i, j: mu


def _seed(shares: Shares) -> Callable[[str, str], float]:
    del shares  # the catalogue's constants are not fitted
    return lambda i, j: KEEP_WHEN_SHARED[str(ast.literal_eval(i)[0])]


METHODS: dict[str, Predict] = {
    "predictor": _model(fit_interference, clip=True),
    "additive": _model(fit_additive, clip=False),
    "additive, clipped": _model(fit_additive, clip=True),
    "mean share": _mean,
    "catalogue seed": _seed,
}


def pairs_of(shares: Shares) -> list[tuple[str, str]]:
    """Unordered pairs, each once (``i <= j``), in a fixed order."""
    return sorted({(min(i, j), max(i, j)) for i, j in shares})


def run_folds(
    shares: Shares, folds: list[list[tuple[str, str]]]
) -> dict[str, list[list[tuple[float, float]]]]:
    """Per method, per fold: (prediction, target) of every hidden share."""
    out: dict[str, list[list[tuple[float, float]]]] = {m: [] for m in METHODS}
    for fold in folds:
        hidden = {(i, j) for i, j in fold} | {(j, i) for i, j in fold}
        train = {k: v for k, v in shares.items() if k not in hidden}
        for name, method in METHODS.items():
            predict = method(train)
            out[name].append([(predict(i, j), shares[(i, j)]) for i, j in sorted(hidden)])
    return out


def _mae(rows: list[tuple[float, float]], clip_target: bool = False) -> float:
    return statistics.fmean(abs(p - (min(t, 1.0) if clip_target else t)) for p, t in rows)


def summarise(
    per_method: dict[str, list[list[tuple[float, float]]]], groups: int, per_group: int
) -> dict[str, Any]:
    """MAE over all hidden shares, plus its spread over groups of ``per_group`` folds
    (a repeat of K-fold; one pair for leave-one-pair-out)."""
    out: dict[str, Any] = {}
    for name, folds in per_method.items():
        flat = [r for f in folds for r in f]
        group_mae = [
            _mae([r for f in folds[g * per_group : (g + 1) * per_group] for r in f])
            for g in range(groups)
        ]
        out[name] = {
            "mae": round(_mae(flat), 4),
            "mae_vs_clipped_targets": round(_mae(flat, clip_target=True), 4),
            "spread": {
                "over": "repeat" if per_group > 1 else "pair",
                "std": round(statistics.pstdev(group_mae), 4),
                "min": round(min(group_mae), 4),
                "max": round(max(group_mae), 4),
            },
        }
    return out


def main() -> int:
    import argparse

    argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0]).parse_args()
    t0 = time.perf_counter()
    table = json.loads((ROOT / DATA).read_text())
    shares = observed_shares(table[GPU])
    pairs = pairs_of(shares)
    lopo = run_folds(shares, [[p] for p in pairs])
    kfold_folds = []
    for seed in SEEDS:
        order = np.random.default_rng(seed).permutation(len(pairs))
        kfold_folds += [[pairs[q] for q in order[f::FOLDS]] for f in range(FOLDS)]
    kfold = run_folds(shares, kfold_folds)
    full = fit_interference(shares)
    result: dict[str, Any] = {
        "command": COMMAND,
        "data": DATA,
        "gpu": GPU,
        "jobs": len({i for i, _ in shares}),
        "pairs": len(pairs),
        "shares": len(shares),
        "shares_above_1": sum(1 for v in shares.values() if v > 1.0),
        "targets": "the measured shares as they are (pair rate / alone rate, some > 1 "
        "by noise); mae_vs_clipped_targets scores against min(share, 1)",
        "hidden": "both sides of a pair at once (share_ij and share_ji); a self-pair is one share",
        "schemes": {
            "leave_one_pair_out": {
                "folds": len(pairs),
                "methods": summarise(lopo, len(pairs), 1),
            },
            "kfold": {
                "folds": FOLDS,
                "seeds": [SEEDS.start, SEEDS.stop - 1],
                "methods": summarise(kfold, len(SEEDS), FOLDS),
            },
        },
        "predictor_on_all_pairs": {
            "penalties_chosen": [p if np.isfinite(p) else "additive" for p in full.penalties]
        },
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    _print(result, time.perf_counter() - t0)
    return 0


def _print(result: dict[str, Any], seconds: float) -> None:
    s = result["schemes"]
    lo, kf = s["leave_one_pair_out"]["methods"], s["kfold"]["methods"]
    print(
        f"{result['gpu']}: {result['jobs']} jobs, {result['pairs']} pairs, "
        f"{result['shares']} shares ({result['shares_above_1']} above 1)"
    )
    print(f"{'MAE of the share kept':<22}{'leave-one-pair-out':>20}{'5-fold x 20 seeds':>26}")
    for name in METHODS:
        k = kf[name]
        print(
            f"{name:<22}{lo[name]['mae']:>20.4f}"
            f"{k['mae']:>14.4f} ({k['spread']['min']:.3f}-{k['spread']['max']:.3f})"
        )
    print(f"wrote {OUT.relative_to(ROOT)} in {seconds:.1f} s")


if __name__ == "__main__":
    raise SystemExit(main())
