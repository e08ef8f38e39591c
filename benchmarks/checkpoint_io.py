"""What a checkpoint's size adds to a restart, measured on this host (docs/lyra.md).

The restart model (``lyra_ray/model/restart_cost.py``) takes its phases from live
resizes of a tiny model (``benchmarks/resize_phases.py``), whose checkpoint is a few
kilobytes. A real job's checkpoint is megabytes to gigabytes, and a restart writes it
once and reads it back once. This benchmark times exactly what the live loop does with
one (``lyra_ray/train/step_loop.py``), at several sizes:

* **save**: ``torch.save`` of a state dict into a fresh temporary directory, then Ray
  Train persisting that directory into the run's storage (``pyarrow.fs.copy_files``,
  what ``ray.train.report(checkpoint=...)`` does for a local ``storage_path``), both
  flushed to disk (``os.fsync``);
* **restore**: ``torch.load`` of the persisted file with the page cache dropped for it
  (``posix_fadvise(DONTNEED)``), as a worker on another node would read it.

A least-squares line per phase (seconds = fixed + bytes x per-byte cost) gives the
per-GB costs the restart model copies (a unit test keeps them equal to this file).

    .venv/bin/python benchmarks/checkpoint_io.py      # ~1 min, writes
    benchmarks/results/checkpoint_io.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GB = 1e9


def _fsync_tree(path: Path) -> None:
    for p in path.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def _drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def one(size_bytes: int, work: Path) -> dict[str, float]:
    import pyarrow.fs
    import torch

    state = {"w": torch.randn(size_bytes // 4)}
    storage = work / "storage"
    storage.mkdir(exist_ok=True)
    dest = storage / f"ckpt_{size_bytes}"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        torch.save(state, Path(tmp) / "model.pt")
        _fsync_tree(Path(tmp))
        t1 = time.perf_counter()
        dest.mkdir()  # Ray creates the directory, then copies (train/_internal/storage.py)
        pyarrow.fs.copy_files(tmp, str(dest))
        _fsync_tree(dest)
    t2 = time.perf_counter()
    del state
    _drop_cache(dest / "model.pt")
    t3 = time.perf_counter()
    torch.load(dest / "model.pt", map_location="cpu", weights_only=True)
    t4 = time.perf_counter()
    shutil.rmtree(dest)
    return {"torch_save_s": t1 - t0, "persist_s": t2 - t1, "save_s": t2 - t0, "restore_s": t4 - t3}


def fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """(intercept s, slope s per byte), least squares."""
    slope, intercept = statistics.linear_regression(xs, ys)
    return intercept, slope


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mb", default="32,128,512")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/checkpoint_io.json")
    args = ap.parse_args()
    sizes = [int(float(s) * 1e6) for s in args.sizes_mb.split(",")]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(
        dir=ROOT / "build" if (ROOT / "build").is_dir() else None
    ) as w:
        for _ in range(args.repeats):
            for size in sizes:
                r = one(size, Path(w))
                r["bytes"] = size
                runs.append(r)
                print(
                    f"{size / 1e6:.0f} MB: save {r['save_s']:.3f} s, restore {r['restore_s']:.3f} s"
                )
    out: dict[str, Any] = {
        "command": "benchmarks/checkpoint_io.py " + " ".join(sys.argv[1:]),
        "host": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "runs": runs,
    }
    for phase in ("save_s", "restore_s"):
        a, b = fit([float(r["bytes"]) for r in runs], [r[phase] for r in runs])
        out[phase.replace("_s", "")] = {"fixed_s": round(a, 4), "s_per_gb": round(b * GB, 3)}
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: out[k] for k in ("save", "restore")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
