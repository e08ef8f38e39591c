"""Which popularity the served model's routers are calibrated to, per MoE layer.

WHY measured loads mapped, not only a Zipf curve: the skew that matters is the one real
traffic has. DeepSeek-V3's published expert loads (``../shared/data/moe``: 58 MoE layers x
256 experts, top-8) are the real thing, but the served model is small (a few layers of a
few experts). ``mapped_shares`` keeps the *shape* of each layer's popularity curve:

- layers: the small model's layer ``i`` takes the source's MoE layer at the same relative
  depth (``round(i * (L_src - 1) / (L - 1))``);
- experts: the source layer's experts sorted by load are cut into ``E`` consecutive rank
  groups (``np.array_split``: 256 / 8 = 32 each), and small expert of rank ``r`` gets the
  summed load of group ``r``. So the small model's most popular expert carries what
  DeepSeek-V3's top 1/E of experts carry (0.33 of the picks at E = 8, decode file); summing
  random blocks of experts instead would average the skew away;
- top-k: a token picks an expert at most once, so no share may exceed ``1 / top_k``; the
  excess is water-filled onto the others in proportion (``cap_shares``);
- identities: which small expert gets which rank is a seeded permutation per layer, so the
  popular expert differs from layer to layer, as in the source.

Pure numpy.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]


def cap_shares(share: Floats, top_k: int) -> Floats:
    """Shares [E] (summing to 1) with none above ``1 / top_k``: the excess goes to the
    uncapped experts in proportion to their shares (water-filling)."""
    s = np.asarray(share, dtype=np.float64)
    s = s / s.sum()
    cap = 1.0 / top_k
    capped = np.zeros(s.size, dtype=bool)
    for _ in range(s.size):
        free = ~capped
        rest = 1.0 - cap * capped.sum()
        s = np.where(capped, cap, s)
        if s[free].sum() > 0:
            s[free] = s[free] / s[free].sum() * rest
        over = free & (s > cap + 1e-12)
        if not over.any():
            break
        capped |= over
    return s


def zipf_shares(layers: int, experts: int, top_k: int, skew: float, seed: int) -> Floats:
    """Rank ``r`` gets a share ``(1 + r) ** -skew`` (capped at 1/top_k), ranks permuted per
    layer by ``seed``: the Zipf popularity the synthetic default asks for."""
    if not (np.isfinite(skew) and skew >= 0):
        raise ValueError(f"skew: must be finite and >= 0, got {skew}")
    base = cap_shares(np.power(1.0 + np.arange(experts, dtype=np.float64), -float(skew)), top_k)
    rng = np.random.default_rng(seed)
    return np.stack([base[rng.permutation(experts)] for _ in range(layers)])


def mapped_shares(
    logical_count: Floats, layers: int, experts: int, top_k: int, seed: int
) -> Floats:
    """Per-layer pick shares [layers, experts] with the shape of a measured load file's
    popularity (``logical_count`` [source layers, source experts]; all-zero rows, dense
    layers, are skipped). See the module doc for the mapping."""
    src = np.asarray(logical_count, dtype=np.float64)
    if src.ndim != 2 or not np.all(np.isfinite(src)) or np.any(src < 0):
        raise ValueError("logical_count: must be [layers, experts] of finite numbers >= 0")
    src = src[src.sum(1) > 0]
    if src.shape[0] == 0:
        raise ValueError("logical_count: every layer is all zeros")
    if experts > src.shape[1]:
        raise ValueError(f"experts ({experts}) exceed the source's ({src.shape[1]})")
    if layers < 1 or not 1 <= top_k <= experts:
        raise ValueError(f"layers ({layers}) >= 1 and 1 <= top_k ({top_k}) <= experts")
    pick = np.rint(np.linspace(0, src.shape[0] - 1, layers)).astype(int)
    rng = np.random.default_rng(seed)
    rows = []
    for i in pick:
        ranked = np.sort(src[i])[::-1]
        groups = np.array([g.sum() for g in np.array_split(ranked, experts)])
        share = cap_shares(groups + 1e-12, top_k)
        rows.append(share[rng.permutation(experts)])
    return np.stack(rows)
