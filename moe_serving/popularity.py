"""Expert-popularity estimators: Lina's path-conditioned estimator and a marginal baseline.

WHY the path estimator: a token that took expert a at layer i-1 (and b at i-2 ...) tends to
take the same next expert, whatever the batch it arrived in. So P(next expert | recent path)
profiled once transfers across workloads, and summing it over the tokens actually in flight
predicts each layer's load before that layer's gate runs — including after the traffic's
composition shifts. A marginal moving average of past loads cannot see the shift until it has
averaged over it.

Routes are arrays ``[layers, tokens, k]`` of chosen expert ids (column 0 = the top choice,
which is what a path is made of; all k choices count towards load).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Routes = npt.NDArray[np.int64]
Loads = npt.NDArray[np.float64]

_MAX_TABLE = 1 << 22


def load_counts(routes: Routes, experts: int) -> Loads:
    """Actual per-layer load [L, E]: tokens routed to each expert (all k choices count)."""
    layers = routes.shape[0]
    out = np.zeros((layers, experts))
    for layer in range(layers):
        out[layer] = np.bincount(routes[layer].ravel(), minlength=experts)[:experts]
    return out


def load_error(estimate: Loads, actual: Loads) -> float:
    """Relative L1 error sum|est - actual| / sum(actual) (0 = exact, 2 = disjoint)."""
    total = float(np.sum(actual))
    return float(np.abs(estimate - actual).sum() / total) if total > 0 else 0.0


class PathEstimator:
    """Lina's estimator: P(expert at layer l | top-1 experts at layers l-h .. l-1).

    Keeps tables for every history length 0..``history`` and backs off to a shorter path when
    a path was seen fewer than ``min_count`` times, so rare paths do not produce noise.
    """

    def __init__(self, layers: int, experts: int, history: int = 2, min_count: int = 4) -> None:
        if history < 0 or layers < 1 or experts < 1:
            raise ValueError("need layers >= 1, experts >= 1, history >= 0")
        if experts**history > _MAX_TABLE:
            raise ValueError(f"experts**history = {experts**history} paths is too many")
        self.layers, self.experts, self.history, self.min_count = (
            layers,
            experts,
            history,
            min_count,
        )
        # picks[h][l][path] = how often each expert was chosen after `path` (length h);
        # seen[h][l][path] = how many tokens had that path.
        self.picks = [np.zeros((layers, experts**h, experts)) for h in range(history + 1)]
        self.seen = [np.zeros((layers, experts**h)) for h in range(history + 1)]

    def _keys(self, top1: Routes, layer: int, h: int) -> npt.NDArray[np.int64]:
        """Integer code of each token's path over layers layer-h .. layer-1."""
        key = np.zeros(top1.shape[1], dtype=np.int64)
        for j in range(layer - h, layer):
            key = key * self.experts + top1[j]
        return key

    def observe(self, routes: Routes) -> None:
        """Profile one batch of routes [L, N, k]."""
        top1 = routes[:, :, 0]
        for layer in range(self.layers):
            onehot = np.zeros((routes.shape[1], self.experts))
            for c in range(routes.shape[2]):
                onehot[np.arange(routes.shape[1]), routes[layer, :, c]] += 1.0
            for h in range(min(self.history, layer) + 1):
                key = self._keys(top1, layer, h)
                np.add.at(self.picks[h][layer], key, onehot)
                np.add.at(self.seen[h][layer], key, 1.0)

    def expected_picks(self, layer: int, routes_before: Routes) -> npt.NDArray[np.float64]:
        """Per-token expected picks [N, E] at ``layer`` given routes of layers < ``layer``."""
        top1 = routes_before[:, :, 0]
        n = top1.shape[1]
        out = np.zeros((n, self.experts))
        done = np.zeros(n, dtype=bool)
        for h in range(min(self.history, layer), -1, -1):
            key = self._keys(top1, layer, h)
            seen = self.seen[h][layer][key]
            use = (~done) & (seen >= (self.min_count if h > 0 else 1))
            out[use] = self.picks[h][layer][key[use]] / seen[use, None]
            done |= use
        if not done.all():  # nothing profiled for this layer at all: assume uniform
            k = self.picks[0][layer].sum() / max(1.0, self.seen[0][layer].sum())
            out[~done] = max(k, 1.0) / self.experts
        return out

    def estimate(self, layer: int, routes_before: Routes) -> Loads:
        """Expected load [E] of ``layer`` for the tokens whose earlier routes are given."""
        est: Loads = self.expected_picks(layer, routes_before).sum(0)
        return est

    def estimate_all(self, routes: Routes) -> Loads:
        """One-layer-ahead estimate for every layer, each from the actual earlier routes."""
        return np.stack([self.estimate(layer, routes[:layer]) for layer in range(self.layers)])


class MarginalEstimator:
    """Baseline: exponential moving average of each layer's load shares over past batches."""

    def __init__(self, layers: int, experts: int, alpha: float = 0.3) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self.share = np.full((layers, experts), 1.0 / experts)
        self._fresh = True

    def observe(self, loads: Loads) -> None:
        """Fold one batch's actual loads [L, E] into the moving average."""
        tot = loads.sum(1, keepdims=True)
        share = np.where(tot > 0, loads / np.maximum(tot, 1e-12), self.share)
        self.share = share if self._fresh else self.alpha * share + (1 - self.alpha) * self.share
        self._fresh = False

    def estimate_all(self, picks_per_layer: float) -> Loads:
        """Estimated loads [L, E] for a batch making ``picks_per_layer`` expert picks."""
        out: Loads = self.share * picks_per_layer
        return out
