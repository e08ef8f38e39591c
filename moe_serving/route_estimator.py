"""Lina's path-based popularity estimate, fitted online from the routes the gates took.

WHY online and with decay: ``popularity.PathEstimator`` is profiled once, at deploy, on a
synthetic stream; after a shift in traffic its table describes the old traffic for ever. Here
every batch the gates route is folded into decayed transition counts (the top-1 experts a
token chose at layers ``l-h .. l-1`` -> the experts it chose at layer ``l``), so the table
follows the traffic, and ``decay`` says how fast it forgets.

WHY per token: the counted (marginal) load of layer ``l`` is the same guess for every batch;
a batch whose tokens took unusual paths at the layers before ``l`` will, to the extent the
routes are correlated across layers, also be unusual at ``l``. Summing each in-flight
token's conditional distribution gives the batch's own estimate of layer ``l``'s load before
its gate has run, early enough to place the batch's tokens on replicas (or to prefetch).

How a serving ingress uses it (the only calls it needs)::

    est = OnlineRouteEstimator(layers, experts, history=1, decay=0.8)
    # per batch, per layer l >= 1, after the gates of layers < l have run:
    load_l = est.estimate(l, routes[:l])        # [E] expected picks at layer l
    counts = packing.apportion(load_l[None], budget)[0]   # replicas for this batch
    # after the batch's last layer:
    est.observe(routes)                         # [L, N, k] chosen experts

``counted(l, tokens)`` is the marginal estimate from the same decayed counts (the baseline).
The live service does not use it, and has no switch for it (docs/moe.md, "Popularity from
the routes in flight", says why with the numbers of ``benchmarks/moe_path_estimation.py``):
it beats counted loads only for a batch still in flight, before its gate runs, which is
when replicas would have to be prefetched; phase 2 plans for the windows to come from a
whole window's counts, and the per-request split already has each layer's actual counts.
Pure numpy: no Ray, no clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Routes = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]

MAX_TABLE = 1 << 22
"""Largest number of path keys (``experts ** history``) a layer's table may hold."""


@dataclass(frozen=True)
class RouteEstimateConfig:
    """How an estimator of a layer's load from the routes in flight is fitted."""

    history: int = 1
    """Top-1 experts of this many preceding layers form a token's path (1 = layer l-1)."""
    decay: float = 0.8
    """Weight the counts keep per observed batch (1.0 = never forget)."""
    min_count: float = 4.0
    """Decayed tokens a path needs before its row is trusted; fewer: back off to a shorter path."""

    def __post_init__(self) -> None:
        _check_params(self.history, self.decay, self.min_count)


def _check_params(history: int, decay: float, min_count: float) -> None:
    if not isinstance(history, (int, np.integer)) or isinstance(history, bool) or history < 0:
        raise ValueError(f"history must be an integer >= 0, got {history!r}")
    if not (isinstance(decay, (int, float)) and 0.0 < decay <= 1.0):
        raise ValueError(f"decay must be in (0, 1], got {decay!r}")
    if not (isinstance(min_count, (int, float)) and np.isfinite(min_count) and min_count >= 0):
        raise ValueError(f"min_count must be a finite number >= 0, got {min_count!r}")


def _as_routes(value: object, field: str, experts: int) -> Routes:
    """``value`` as an int64 array of expert ids, or ValueError naming ``field``."""
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{field} must hold expert ids, found NaN or inf")
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{field} must hold integer expert ids, found a fraction")
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{field} must hold integer expert ids, got dtype {arr.dtype}")
    out = arr.astype(np.int64)
    if out.size and (out.min() < 0 or out.max() >= experts):
        raise ValueError(
            f"{field} must hold expert ids in [0, {experts}), got {out.min()}..{out.max()}"
        )
    return out


class OnlineRouteEstimator:
    """Decayed counts of P(experts at layer l | top-1 experts at layers l-h .. l-1).

    Tables exist for every path length 0..``history``; a token whose path has fewer than
    ``min_count`` decayed observations backs off to a shorter one (length 0 = the layer's
    marginal, i.e. the counted load). A layer nothing was observed for is assumed uniform.
    """

    def __init__(
        self,
        layers: int,
        experts: int,
        history: int = 1,
        decay: float = 0.8,
        min_count: float = 4.0,
    ) -> None:
        if layers < 1 or experts < 1:
            raise ValueError(f"layers ({layers}) and experts ({experts}) must be >= 1")
        _check_params(history, decay, min_count)
        if experts**history > MAX_TABLE:
            raise ValueError(f"history: experts**history = {experts**history} paths is too many")
        self.layers, self.experts, self.history = layers, experts, int(history)
        self.decay, self.min_count = float(decay), float(min_count)
        # picks[h][l, path, e]: decayed picks of e at layer l by tokens with that path of
        # length h; seen[h][l, path]: decayed tokens with that path.
        self.picks = [np.zeros((layers, experts**h, experts)) for h in range(self.history + 1)]
        self.seen = [np.zeros((layers, experts**h)) for h in range(self.history + 1)]

    @classmethod
    def from_config(
        cls, layers: int, experts: int, cfg: RouteEstimateConfig
    ) -> OnlineRouteEstimator:
        return cls(layers, experts, cfg.history, cfg.decay, cfg.min_count)

    def _keys(self, top1: Routes, layer: int, h: int) -> npt.NDArray[np.int64]:
        """Integer code of each token's path over layers ``layer-h .. layer-1``."""
        key = np.zeros(top1.shape[1], dtype=np.int64)
        for j in range(layer - h, layer):
            key = key * self.experts + top1[j]
        return key

    def observe(self, routes: object) -> None:
        """Fold one batch's routes ``[layers, tokens, k]`` (column 0 = top choice) in, after
        multiplying every count so far by ``decay``."""
        r = _as_routes(routes, "routes", self.experts)
        if r.ndim != 3 or r.shape[0] != self.layers or r.shape[2] < 1:
            raise ValueError(f"routes must be [layers={self.layers}, tokens, k], got {r.shape}")
        n, e = r.shape[1], self.experts
        for h in range(self.history + 1):
            self.picks[h] *= self.decay
            self.seen[h] *= self.decay
        top1 = r[:, :, 0]
        for layer in range(self.layers):
            onehot = np.zeros((n, e))
            for c in range(r.shape[2]):
                np.add.at(onehot, (np.arange(n), r[layer, :, c]), 1.0)
            for h in range(min(self.history, layer) + 1):
                key = self._keys(top1, layer, h)
                np.add.at(self.picks[h][layer], key, onehot)
                np.add.at(self.seen[h][layer], key, 1.0)

    def _check_layer(self, layer: int) -> None:
        if not isinstance(layer, (int, np.integer)) or not 0 <= layer < self.layers:
            raise ValueError(f"layer must be an integer in [0, {self.layers}), got {layer!r}")

    def picks_per_token(self, layer: int) -> float:
        """Observed picks per token at ``layer`` (the gate's k); 1.0 before any observation."""
        self._check_layer(layer)
        seen = float(self.seen[0][layer].sum())
        return float(self.picks[0][layer].sum()) / seen if seen > 0 else 1.0

    def counted(self, layer: int, tokens: int) -> Floats:
        """The marginal estimate [E]: the decayed counted load of ``layer``, scaled to a batch
        of ``tokens`` tokens. Uniform before anything was observed."""
        self._check_layer(layer)
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens}")
        row = self.picks[0][layer, 0]
        total = float(row.sum())
        share = row / total if total > 0 else np.full(self.experts, 1.0 / self.experts)
        out: Floats = share * tokens * self.picks_per_token(layer)
        return out

    def expected_picks(self, layer: int, routes_before: object) -> Floats:
        """Per-token expected picks [N, E] at ``layer`` from the tokens' routes at the layers
        before it: ``routes_before`` is ``[layer, N]`` (top-1) or ``[layer, N, k]``."""
        self._check_layer(layer)
        r = _as_routes(routes_before, "routes_before", self.experts)
        given = r.shape
        if r.ndim == 3 and r.shape[2] >= 1:
            r = r[:, :, 0]
        if r.ndim != 2 or r.shape[0] != layer:
            raise ValueError(
                f"routes_before must be [layer={layer}, tokens] or [layer={layer}, tokens, k], "
                f"got {given}"
            )
        n = r.shape[1]
        out = np.zeros((n, self.experts))
        done = np.zeros(n, dtype=bool)
        for h in range(min(self.history, layer), -1, -1):
            key = self._keys(r, layer, h)
            seen = self.seen[h][layer][key]
            use = (~done) & (seen >= (self.min_count if h > 0 else 1e-12))
            out[use] = self.picks[h][layer][key[use]] / seen[use, None]
            done |= use
        out[~done] = self.picks_per_token(layer) / self.experts
        return out

    def estimate(self, layer: int, routes_before: object) -> Floats:
        """Expected load [E] of ``layer`` for the batch whose earlier routes are given."""
        out: Floats = self.expected_picks(layer, routes_before).sum(0)
        return out

    def predict(self, layer: int, routes_before: object) -> npt.NDArray[np.int64]:
        """Each token's most likely top expert at ``layer`` [N] (ties: lowest id)."""
        out: npt.NDArray[np.int64] = np.argmax(
            self.expected_picks(layer, routes_before), axis=1
        ).astype(np.int64)
        return out
