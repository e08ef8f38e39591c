"""The interference predictor's solver: the additive model by least squares, the low-rank
interaction by soft-impute, and the penalty chosen by cross-validation over pairs.

Split from :mod:`lyra_ray.model.interference` (the model's API and the throughput
tables it fills) because this is numerical machinery with its own constants; see that
module for the model and why. Pure and deterministic (the inner folds come from a seed).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

MIN_SHARE = 1e-3
"""Lower end of a predicted share: a prediction says the job runs, however slowly."""

MAX_SHARE = 1.0
"""Upper end of a predicted share. A measured share can exceed 1 by noise (1.10 in the
packaged H200 table, more in single runs); a prediction should not promise that sharing
speeds a job up."""

PENALTIES: tuple[float, ...] = (math.inf, 0.6, 0.4, 0.25, 0.15, 0.1, 0.05)
"""Candidate nuclear-norm penalties, as fractions of the largest singular value of the
additive model's residual (so the grid does not depend on the table's scale); ``inf`` is
the additive model. Shrinking by a fraction >= 1 would leave ``L`` empty anyway."""

MIN_PAIRS_FOR_CV = 10
"""Below this many measured pairs an inner cross-validation has too little to choose
from; the additive model is used."""

_ITERATIONS = 500
_TOLERANCE = 1e-4
"""Soft-impute stops when no entry moved more than this: shares are O(1) and measured
to a few per cent, so a smaller step changes no prediction that matters."""


@dataclass(frozen=True)
class InterferenceModel:
    """A fitted share model for one GPU type: ``share(i, j) = mu + a[i] + b[j] + L[i, j]``.

    A job the fit never saw (no measured pair) has ``a = b = 0`` and no ``L``: it is
    taken for the average job, the population mean being the best guess there is.
    """

    mean: float
    """``mu``: the share an average job keeps beside an average partner."""
    suffer: Mapping[str, float] = field(default_factory=dict)
    """``a[i]``: how much more (positive) or less than average job ``i`` keeps."""
    harm: Mapping[str, float] = field(default_factory=dict)
    """``b[j]``: how much more (positive) or less than average a job keeps beside ``j``."""
    interaction: Mapping[tuple[str, str], float] = field(default_factory=dict)
    """``L[i, j]`` for jobs the fit saw; absent means 0."""
    penalties: tuple[float, ...] = (math.inf,)
    """The penalty each inner split chose, as fractions of the residual's top singular
    value (``inf``: the additive model); the fit is the mean of their fits."""

    def share(self, job: str, partner: str) -> float:
        """The model's share, unclipped (see :func:`predict_share` for the served one)."""
        return (
            self.mean
            + self.suffer.get(job, 0.0)
            + self.harm.get(partner, 0.0)
            + self.interaction.get((job, partner), 0.0)
        )


def fit(
    shares: Mapping[tuple[str, str], float],
    penalties: tuple[float, ...],
    folds: int,
    splits: int = 1,
    seed: int = 0,
) -> InterferenceModel:
    """Index the jobs the shares name, choose penalties, fit on all shares."""
    if not shares:
        raise ValueError("no measured shares to fit")
    names = sorted({j for pair in shares for j in pair})
    index = {n: k for k, n in enumerate(names)}
    n = len(names)
    values = np.zeros((n, n))
    mask = np.zeros((n, n), dtype=bool)
    for (i, j), s in shares.items():
        values[index[i], index[j]] = s
        mask[index[i], index[j]] = True
    pairs = [(i, j) for i in range(n) for j in range(i, n) if mask[i, j] or mask[j, i]]
    scale = _top_singular(values, mask)
    lams = np.array([p * scale for p in penalties])
    picks = [0]
    if len(penalties) > 1 and folds >= 2 and len(pairs) >= MIN_PAIRS_FOR_CV:
        picks = _choose(values, mask, pairs, lams, folds, range(seed, seed + splits))
    chosen = sorted(set(picks))
    fits = _complete(values, np.repeat(mask[None], len(chosen), axis=0), lams[chosen])
    weights = np.array([picks.count(c) for c in chosen], dtype=float) / len(picks)
    z = np.tensordot(weights, fits, axes=1)
    mu = float(z.mean())
    rows = z.mean(axis=1) - mu
    cols = z.mean(axis=0) - mu
    inter = z - mu - rows[:, None] - cols[None, :]
    return InterferenceModel(
        mean=mu,
        suffer={names[k]: float(rows[k]) for k in range(n)},
        harm={names[k]: float(cols[k]) for k in range(n)},
        interaction={
            (names[a], names[b]): float(inter[a, b])
            for a in range(n)
            for b in range(n)
            if inter[a, b] != 0.0
        },
        penalties=tuple(float(penalties[k]) for k in picks),
    )


def _choose(
    values: NDArray[np.float64],
    mask: NDArray[np.bool_],
    pairs: list[tuple[int, int]],
    lams: NDArray[np.float64],
    folds: int,
    seeds: range,
) -> list[int]:
    """Per split (one per seed), the index of the penalty with the least inner-CV
    error. Every split, fold and penalty is fitted at once, as one batch."""
    k = min(folds, len(pairs))
    held: list[list[tuple[int, int]]] = []
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(pairs))
        held += [[pairs[q] for q in order[f::k]] for f in range(k)]
    masks = np.repeat(mask[None], len(held), axis=0)
    for f, ps in enumerate(held):
        for i, j in ps:
            masks[f, i, j] = masks[f, j, i] = False
    n_lam = len(lams)
    z = _complete(values, np.repeat(masks, n_lam, axis=0), np.tile(lams, len(held)))
    z = np.clip(z, MIN_SHARE, MAX_SHARE).reshape(len(held), n_lam, *values.shape)
    err = np.zeros((len(seeds), n_lam))
    for f, ps in enumerate(held):
        for i, j in ps:
            for a, b in {(i, j), (j, i)}:
                if mask[a, b]:
                    err[f // k] += np.abs(z[f, :, a, b] - values[a, b])
    return [int(np.argmin(e)) for e in err]


def _complete(
    values: NDArray[np.float64], masks: NDArray[np.bool_], lams: NDArray[np.float64]
) -> NDArray[np.float64]:
    """Soft-impute with unpenalised row and column effects, a batch at a time.

    ``masks[k]`` says which entries of ``values`` fit ``k`` sees, ``lams[k]`` its
    nuclear-norm penalty. Each step fills the unseen entries with the current guess,
    takes the row and column means (the additive part, unpenalised) and soft-thresholds
    the singular values of what is left: a proximal-gradient step, accelerated as in
    FISTA (plain soft-impute needed three times the steps). Starting from the
    least-squares additive fit, an infinite penalty stays there: the additive model is
    this with ``L = 0``. A fit leaves the batch once no entry moves by ``_TOLERANCE``.
    """
    z = _additive_ls(values, masks)
    todo = np.flatnonzero(np.isfinite(lams))
    prev = z[todo]
    ahead = prev.copy()
    step = 1.0
    for _ in range(_ITERATIONS):
        if todo.size == 0:
            break
        filled = np.where(masks[todo], values[None], ahead)
        mu = filled.mean(axis=(1, 2), keepdims=True)
        rows = filled.mean(axis=2, keepdims=True)
        cols = filled.mean(axis=1, keepdims=True)
        u, s, vt = np.linalg.svd(filled - rows - cols + mu)
        s = np.maximum(s - lams[todo, None], 0.0)
        new = rows + cols - mu + (u * s[:, None, :]) @ vt
        moved = np.max(np.abs(new - prev), axis=(1, 2))
        nxt = (1.0 + math.sqrt(1.0 + 4.0 * step * step)) / 2.0
        ahead = new + ((step - 1.0) / nxt) * (new - prev)
        step = nxt
        z[todo] = new
        going = moved >= _TOLERANCE
        todo, prev, ahead = todo[going], new[going], ahead[going]
    return z


def _additive_ls(values: NDArray[np.float64], masks: NDArray[np.bool_]) -> NDArray[np.float64]:
    """Least-squares ``mu + a[i] + b[j]`` over each mask's entries, as full matrices.

    The normal equations come straight from the mask's counts; a tiny ridge fixes the
    model's one free direction (and zeroes the effects of a job a mask never shows).
    """
    batch, n, _ = masks.shape
    m = masks.astype(float)
    y = np.where(masks, values[None], 0.0)
    rc, cc = m.sum(axis=2), m.sum(axis=1)
    size = 1 + 2 * n
    a = np.zeros((batch, size, size))
    a[:, 0, 0] = m.sum(axis=(1, 2))
    a[:, 0, 1 : 1 + n] = a[:, 1 : 1 + n, 0] = rc
    a[:, 0, 1 + n :] = a[:, 1 + n :, 0] = cc
    idx = np.arange(n)
    a[:, 1 + idx, 1 + idx] = rc
    a[:, 1 + n + idx, 1 + n + idx] = cc
    a[:, 1 : 1 + n, 1 + n :] = m
    a[:, 1 + n :, 1 : 1 + n] = m.transpose(0, 2, 1)
    ridge = 1e-9 * np.maximum(a[:, 0, 0], 1.0)
    a[:, 1 + np.arange(2 * n), 1 + np.arange(2 * n)] += ridge[:, None]
    a[:, 0, 0] += 1e-12
    rhs = np.concatenate([y.sum(axis=(1, 2))[:, None], y.sum(axis=2), y.sum(axis=1)], axis=1)
    w = np.linalg.solve(a, rhs[..., None])[..., 0]
    out: NDArray[np.float64] = w[:, 0, None, None] + w[:, 1 : 1 + n, None] + w[:, None, 1 + n :]
    return out


def _top_singular(values: NDArray[np.float64], mask: NDArray[np.bool_]) -> float:
    """Largest singular value of the additive fit's residual (unseen entries: 0): the
    scale the penalties are fractions of."""
    z = _additive_ls(values, mask[None])[0]
    r = np.where(mask, values - z, 0.0)
    return float(np.linalg.svd(r, compute_uv=False)[0])
