"""Scaling curves: how a job's throughput grows with its worker count.

``speedup(curve, n)`` is throughput with ``n`` workers relative to one worker. ``linear``
(the default) is ``n``. The measured curves are named after the model they were
measured on (``bert``, ``cifar10``, ``deepspeech2``, ``imagenet``, ``ncf``, ``yolov3``):
Pollux/AdaptDL's profiles (OSDI'21, Apache-2.0), reduced by
``benchmarks/derive_curves.py`` to a small table shipped as ``data/curves.json`` in
this package so that the project runs without the shared data folder. They are real and not concave:
e.g. bert speeds up almost linearly on the 4 GPUs of one node but far less on 5 (the
fifth worker sits on a second node and every step pays a cross-node all-reduce).
Between measured worker counts the speedup is interpolated linearly; beyond the largest
it stays flat.
"""

from __future__ import annotations

import functools
import json
from bisect import bisect_right
from pathlib import Path

CURVES_FILE = "curves.json"


def _curves_path() -> Path | None:
    """The table shipped in this package's ``data/`` (package data, like the measured
    throughputs): found wherever lyra is installed, whatever the working directory.
    Until it moved here it was looked up as ``policies/lyra/curves.json`` through the
    import system, which found it only when run from the repository."""
    # The package's directory, not this file's: the simulator runs this module compiled
    # from build/native/ (lyra_ray/native.py), where no data/ lies beside it.
    import lyra_ray.model

    p = Path(lyra_ray.model.__file__).parent / "data" / CURVES_FILE
    return p if p.is_file() else None


@functools.cache
def _tables() -> dict[str, tuple[tuple[int, ...], tuple[float, ...]]]:
    path = _curves_path()
    if path is None:
        return {}
    raw = json.loads(path.read_text())
    out: dict[str, tuple[tuple[int, ...], tuple[float, ...]]] = {}
    for name, entry in raw["curves"].items():
        pts = sorted((int(n), float(s)) for n, s in entry["speedup"].items())
        out[name] = (tuple(n for n, _ in pts), tuple(s for _, s in pts))
    return out


def known_curves() -> set[str]:
    return {"linear", *_tables()}


def speedup(curve: str, workers: int) -> float:
    """Throughput with ``workers`` workers relative to one worker (0 for no workers)."""
    if workers <= 0:
        return 0.0
    if curve == "linear":
        return float(workers)
    table = _tables().get(curve)
    if table is None:
        raise KeyError(f"unknown scaling curve {curve!r}; known: {sorted(known_curves())}")
    xs, ys = table
    if workers <= xs[0]:
        return ys[0] * workers / xs[0]
    if workers >= xs[-1]:
        return ys[-1]
    k = bisect_right(xs, workers)
    x0, x1, y0, y1 = xs[k - 1], xs[k], ys[k - 1], ys[k]
    return y0 + (y1 - y0) * (workers - x0) / (x1 - x0)


@functools.cache
def _spread_tables() -> dict[str, dict[int, float]]:
    path = _curves_path()
    if path is None:
        return {}
    raw = json.loads(path.read_text())
    return {
        name: {int(n): float(x) for n, x in entry.get("spread", {}).items()}
        for name, entry in raw["curves"].items()
    }


def spread_speedup(curve: str, workers: int) -> float:
    """Like :func:`speedup`, for ``workers`` split over two servers (measured for 2..8).

    A job whose flexible workers sit on a server of another GPU type always spans two
    servers; the consolidated curve would credit it with one server's all-reduce. Where
    no two-server figure is measured (``linear``, or more than 8 workers, whose
    consolidated placement spans several servers anyway) this is :func:`speedup`.
    """
    table = _spread_tables().get(curve, {})
    return table.get(workers, speedup(curve, workers))
