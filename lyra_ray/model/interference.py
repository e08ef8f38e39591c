"""Predict the share of its alone speed a job keeps beside a partner nobody measured.

Why: space sharing needs a rate for every pair a policy may pack, but profiling all
pairs costs n(n+1)/2 runs per GPU type and grows with every new job type. The measured
pairs carry most of what the rest will show: a job that suffers beside one partner
suffers beside the others, and a partner that hurts one job hurts the others (Paragon,
Quasar and Gavel fill their tables the same way, by collaborative filtering).

The model of job ``i``'s share beside partner ``j`` on one GPU type is::

    share[i, j] = mu + a[i] + b[j] + L[i, j]

``mu + a[i] + b[j]`` is the additive model (``a``: how much ``i`` suffers, ``b``: how
much ``j`` hurts); ``L`` is a low-rank interaction (jobs that contend for the same
resource hurt each other more than their averages say), fitted by soft-impute: the
nuclear norm of ``L`` is penalised by ``lam``, so a small table gets a small ``L``. The
penalty is chosen per GPU type by an inner cross-validation over the measured pairs
(each pair held out with both of its sides, as a never-measured pair would be), with
the plain additive model (``lam`` infinite) among the candidates: where the measured
pairs show no structure beyond the additive one, the predictor is the additive model.
The choice is made on several random splits and their fits averaged (bagging), since
one split's choice on a table of 36 pairs is mostly noise.

Everything here is pure (no Ray, no I/O, no clock) and deterministic: the inner folds
come from a fixed seed.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from lyra_ray.model.interference_fit import (
    MAX_SHARE,
    MIN_SHARE,
    PENALTIES,
    InterferenceModel,
    fit,
)
from lyra_ray.model.throughput import EXTRA_KEYS

__all__ = [
    "EXTRA_KEYS",
    "PENALTIES",
    "InterferenceModel",
    "fit_additive",
    "fit_interference",
    "observed_shares",
    "predict_share",
    "predict_table",
]


def predict_share(model: InterferenceModel, job: str, partner: str) -> float:
    """The share ``job`` keeps beside ``partner``, clipped to ``(0, 1]``.

    Clipped because a measured share above 1 is noise, and a share <= 0 would tell a
    policy that the job stops; neither is a prediction worth acting on.
    """
    return min(MAX_SHARE, max(MIN_SHARE, model.share(job, partner)))


def fit_additive(shares: Mapping[tuple[str, str], float]) -> InterferenceModel:
    """The additive model ``mu + a[i] + b[j]`` by least squares: the baseline to beat."""
    return fit(shares, (math.inf,), folds=0)


def fit_interference(
    shares: Mapping[tuple[str, str], float],
    *,
    penalties: Sequence[float] = PENALTIES,
    folds: int = 5,
    splits: int = 5,
    seed: int = 0,
) -> InterferenceModel:
    """Fit the predictor to measured shares ``{(job, partner): share}`` of one GPU type.

    A job that ``shares`` never names gets the population fallback. The penalty is
    chosen from ``penalties`` by ``folds``-fold cross-validation over the measured
    pairs, both sides of a pair held out together, scoring clipped predictions by mean
    absolute error against the measured shares as they are; ties go to the earlier
    (larger) penalty. That choice is repeated over ``splits`` different random splits
    of the pairs and the model is the mean of the chosen fits: on a small table the
    choice of one split is noise (it even changed when only the job names did, since
    the names order the pairs), and the mean of several is both steadier and better.
    """
    return fit(shares, tuple(penalties), folds=folds, splits=splits, seed=seed)


def observed_shares(
    table: Mapping[str, Any], skip: Collection[tuple[str, str]] = ()
) -> dict[tuple[str, str], float]:
    """Measured shares ``{(job, partner): pair rate / alone rate}`` of one GPU type.

    ``table`` is ``{job key: {"null": alone, partner key: [this, partner]}}``. Jobs
    without a positive, finite alone rate are skipped (there is no share without one),
    and so are entries in ``skip`` (earlier predictions are not measurements). An entry
    gives both sides of its pair; where the pair is entered under both jobs, the sides
    are averaged. A self-pair's two sides are both the job beside itself: one share,
    their mean.
    """
    alone = _alone_rates(table)
    sums: dict[tuple[str, str], list[float]] = {}
    skipped = set(skip)
    for job, entry in table.items():
        if job not in alone or not isinstance(entry, Mapping):
            continue
        for partner, rates in entry.items():
            if partner == "null" or partner not in alone or (job, partner) in skipped:
                continue
            pair = _pair(rates)
            if pair is None:
                continue
            this, other = pair
            if partner == job:
                _add(sums, (job, job), (this + other) / 2 / alone[job])
            else:
                _add(sums, (job, partner), this / alone[job])
                _add(sums, (partner, job), other / alone[partner])
    return {k: v[0] / v[1] for k, v in sums.items()}


def predict_table(table: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a Gavel-format table with every unmeasured pair entry filled in.

    For each GPU type (``*_unconsolidated`` ones are copied untouched), every ordered
    pair of jobs with an alone rate, self-pairs included, gets an entry ``[this job,
    partner]`` in steps/s: measured entries are kept as they are; a pair entered under
    one job only is mirrored under the other (a measurement, not a prediction); a pair
    never measured gets ``predicted share x alone rate`` on both sides, the two entries
    mirroring each other. Predicted shares are clipped to ``(0, 1]``: a measured share
    can exceed 1 by noise, a prediction should not promise it.

    The model of a GPU type is fitted on that type's measured pairs only (entries
    already listed in ``predicted`` are not measurements and are left out of the fit,
    and kept). A type with no measured pair at all takes the mean share of the other
    types; if no type has one, nothing is filled: there is nothing to predict from.
    The returned ``predicted`` lists ``[GPU type, job key, partner key]`` of every
    entry filled by a prediction, after the ones the input listed.
    """
    out: dict[str, Any] = copy.deepcopy(dict(table))
    listed = [list(p) for p in table.get("predicted", []) if isinstance(p, list | tuple)]
    earlier = {(str(p[0]), str(p[1]), str(p[2])) for p in listed if len(p) == 3}
    gpus = [
        g
        for g, t in table.items()
        if g not in EXTRA_KEYS and not g.endswith("_unconsolidated") and isinstance(t, Mapping)
    ]
    measured = {
        g: observed_shares(table[g], {(j, p) for gg, j, p in earlier if gg == g}) for g in gpus
    }
    pooled = [s for g in gpus for s in measured[g].values()]
    new: list[list[str]] = []
    for g in gpus:
        alone = _alone_rates(table[g])
        if measured[g]:
            model = fit_interference(measured[g])
        elif pooled:
            model = InterferenceModel(mean=float(np.mean(pooled)))
        else:
            continue
        rows: dict[str, Any] = out[g]
        for i in sorted(alone):
            for j in sorted(alone):
                if j in rows[i]:
                    continue
                back = _pair(table[g][j].get(i))  # the input's, never one filled here
                if back is not None:
                    rows[i][j] = [back[1], back[0]]
                    if (g, j, i) in earlier:  # mirroring a prediction predicts
                        new.append([g, i, j])
                    continue
                s_ij = predict_share(model, i, j)
                s_ji = s_ij if i == j else predict_share(model, j, i)
                rows[i][j] = [_round(s_ij * alone[i]), _round(s_ji * alone[j])]
                new.append([g, i, j])
    out["predicted"] = listed + [p for p in new if tuple(p) not in earlier]
    return out


def _alone_rates(table: Mapping[str, Any]) -> dict[str, float]:
    """``{job key: alone steps/s}`` for the jobs whose alone rate is a positive number."""
    out: dict[str, float] = {}
    for job, entry in table.items():
        if isinstance(entry, Mapping):
            rate: Any = entry.get("null")
            if _number(rate) and rate > 0:
                out[job] = float(rate)
    return out


def _pair(rates: Any) -> tuple[float, float] | None:
    """``[this, partner]`` as two finite numbers >= 0, else None (not a measurement)."""
    if isinstance(rates, list | tuple) and len(rates) == 2 and all(_number(x) for x in rates):
        a, b = float(rates[0]), float(rates[1])
        if a >= 0 and b >= 0:
            return a, b
    return None


def _number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def _add(sums: dict[tuple[str, str], list[float]], key: tuple[str, str], share: float) -> None:
    acc = sums.setdefault(key, [0.0, 0.0])
    acc[0] += share
    acc[1] += 1.0


def _round(x: float) -> float:
    """Six significant digits: a prediction carries no more, and the file stays legible."""
    return float(f"{x:.6g}")
