"""The synthetic route stream: seeded, shifts its popularity mid-stream, checks its fields."""

from __future__ import annotations

import numpy as np
import pytest

from lyra_ray.moe_serving.model import MoEConfig, MoEModel
from lyra_ray.moe_serving.route_stream import StreamConfig, path_information, route_stream

SMALL = MoEConfig(layers=3, experts=4, top_k=1, correlation=0.9, seed=3)


def _stream(seed: int) -> list[np.ndarray]:
    cfg = StreamConfig(batches=8, shift_at=4, seqs=16, seq=8, seed=seed, model=SMALL)
    return list(route_stream(cfg, MoEModel(SMALL)))


def test_same_seed_same_routes_and_shapes() -> None:
    a, b, c = _stream(0), _stream(0), _stream(1)
    assert len(a) == 8 and a[0].shape == (3, 128, 1) and a[0].dtype == np.int64
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_the_shift_moves_popularity() -> None:
    """Topic 0 before, topic 2 after: layer 0's load shares move by a clear L1 distance."""
    routes = _stream(0)

    def shares(batches: list[np.ndarray]) -> np.ndarray:
        counts = sum(np.bincount(r[0].ravel(), minlength=4) for r in batches)
        return np.asarray(counts, dtype=float) / np.sum(counts)

    assert np.abs(shares(routes[:4]) - shares(routes[4:])).sum() > 0.2


def test_path_information_on_a_deterministic_chain() -> None:
    first = np.array([0, 0, 1, 1, 1, 2])
    routes = np.stack([first, (first + 1) % 3])[:, :, None]
    info = path_information(routes)
    assert info == {"from_path": 1.0, "marginal": 0.5}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batches": 4, "shift_at": 5}, "shift_at"),
        ({"seqs": 0}, "seqs"),
        ({"after": (9,)}, "after must name topics"),
        ({"alpha": 0.0}, "alpha"),
    ],
)
def test_bad_stream_config_names_the_field(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        StreamConfig(model=SMALL, **kwargs)  # type: ignore[arg-type]
