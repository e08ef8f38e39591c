"""A warm worker's restart on a real GPU: what the restart model's per-worker floor is.

Why: the restart model (``lyra_ray/model/restart_cost.py``) priced every restart at no
less than a *cold* start measured on an NVIDIA H200 (``../shared/data/gpu/h200.json``,
``cold_start_resnet50``: a fresh process from ``import torch`` to its second ResNet-50
step, 8.07 s median). The live runtime's workers are warm: their processes outlive a
run, so ``import torch`` and the device's initialisation are paid once per worker, not
per restart. What a warm restart still pays on a GPU — the model rebuilt on the host,
moved to the device, the checkpoint restored, the first steps (kernel selection) — was
never measured. This script measures it, on the GPU it finds, with torch alone (no Ray:
the machine that lends a GPU has none; no torchvision: this project's host has none), and
writes one JSON file.

Three cases, each worker in its own process, told to start after it has idled a second:

* **a spare** (``generations[0]`` of a spare not ``warmed_up``): a process that imported
  torch and initialised CUDA (``device_init``, timed apart) but never ran the job, then
  builds the model, moves it to the device, restores, takes two steps. A grow onto a
  waiting spare pays this, plus ``device_init`` where the spare may not touch CUDA
  before its GPUs are known (this runtime's).
* **a warmed spare** (``--warmed``): the same, after a few-KB conv net's step while it
  waited (``warmup``, off the restart's path): what a spare bound to its GPU early could
  save.
* **the same worker again** (``generations[1:]``): the job's loop called again in a
  process that ran it before (a shrink's surviving workers, a restart in place).

Beside them the cold phases of the same processes (``import torch``, device init) and
the writer's side: the checkpoint copied off the device and written with ``fsync``,
and serialised into memory instead (what an object-store hand-over would pay).

The job is the H200 file's ``resnet50`` (batch 64, 224x224, bf16 autocast, SGD with
momentum, synthetic data on the device), so the checkpoint (model + momentum, ~200 MB)
matches the cold-start run's. ResNet-50 is defined here (torchvision's layout) so that
nothing but torch is needed.

    python benchmarks/gpu_warm_restart.py --out results.json            # on a GPU
    python benchmarks/gpu_warm_restart.py --device cpu --batch 2 \\
        --image 32 --spares 1 --generations 2 --out /tmp/w.json          # a dry run
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("gpu_warm_restart")


def _resnet50(torch: Any) -> Any:
    """ResNet-50 v1.5 (torchvision's layout: stride in the 3x3 conv), 1000 classes."""
    nn = torch.nn

    class Bottleneck(nn.Module):  # type: ignore[misc]
        def __init__(self, inp: int, width: int, stride: int) -> None:
            super().__init__()
            out = width * 4
            self.conv1 = nn.Conv2d(inp, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.relu = nn.ReLU(inplace=True)
            self.down = None
            if stride != 1 or inp != out:
                self.down = nn.Sequential(
                    nn.Conv2d(inp, out, 1, stride, bias=False), nn.BatchNorm2d(out)
                )

        def forward(self, x: Any) -> Any:
            idt = x if self.down is None else self.down(x)
            y = self.relu(self.bn1(self.conv1(x)))
            y = self.relu(self.bn2(self.conv2(y)))
            return self.relu(self.bn3(self.conv3(y)) + idt)

    layers: list[Any] = [
        nn.Conv2d(3, 64, 7, 2, 3, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(3, 2, 1),
    ]
    inp = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(inp, width, stride if b == 0 else 1))
            inp = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(inp, 1000)]
    return nn.Sequential(*layers)


def _sync(torch: Any, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _step(torch: Any, model: Any, opt: Any, x: Any, y: Any, device: str) -> None:
    dtype = torch.bfloat16
    with torch.autocast(device_type=device.split(":")[0], dtype=dtype):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    _sync(torch, device)


def _evict(path: str) -> bool:
    """Evict the checkpoint's pages (not the whole page cache: that would evict torch's
    own libraries too, and the next CUDA call would time reading them back from disk)."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
        return True
    except (OSError, AttributeError):
        return False


def child(args: argparse.Namespace) -> None:
    """A worker process: cold phases, then ``--generations`` runs of the job's loop."""
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    import torch

    out["import_torch"] = time.perf_counter() - t0
    t = time.perf_counter()
    if args.device.startswith("cuda"):
        torch.cuda.init()
        torch.zeros(1, device=args.device)
        _sync(torch, args.device)
    out["device_init"] = time.perf_counter() - t
    if args.warmup:
        # What a spare can do while it waits: load the device's kernels for a conv net's
        # copy, layout change, autocast forward and backward, on a model of a few KB.
        t = time.perf_counter()
        nn = torch.nn
        tiny = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
        tiny = tiny.to(args.device, memory_format=torch.channels_last)
        tiny_opt = torch.optim.SGD(tiny.parameters(), lr=0.01, momentum=0.9)
        tx = torch.randn(2, 3, 16, 16, device=args.device)
        _step(torch, tiny, tiny_opt, tx, torch.randint(0, 10, (2,), device=args.device),
              args.device)
        del tiny, tiny_opt, tx
        out["warmup"] = time.perf_counter() - t
    print("ready", flush=True)
    sys.stdin.readline()  # the parent says go: the restart starts here
    gens = []
    for g in range(args.generations):
        evicted = _evict(args.checkpoint) if g == 0 else False
        ph: dict[str, Any] = {"checkpoint_evicted": evicted}
        start = time.perf_counter()
        t = start
        model = _resnet50(torch)
        ph["build_model"] = time.perf_counter() - t
        t = time.perf_counter()
        model = model.to(args.device, memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        _sync(torch, args.device)
        ph["to_device"] = time.perf_counter() - t
        t = time.perf_counter()
        state = torch.load(args.checkpoint, map_location=args.device)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        del state
        _sync(torch, args.device)
        ph["restore"] = time.perf_counter() - t
        x = torch.randn(args.batch, 3, args.image, args.image, device=args.device)
        x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (args.batch,), device=args.device)
        for k in (1, 2):
            t = time.perf_counter()
            _step(torch, model, opt, x, y, args.device)
            ph[f"step_{k}"] = time.perf_counter() - t
        ph["total"] = time.perf_counter() - start
        gens.append(ph)
        del model, opt, x, y
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    out["generations"] = gens
    print(json.dumps(out), flush=True)


def writer(args: argparse.Namespace, torch: Any) -> dict[str, Any]:
    """Train two steps, then save the checkpoint a restart restores; time the save."""
    model = _resnet50(torch).to(args.device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(args.batch, 3, args.image, args.image, device=args.device)
    x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=args.device)
    for _ in range(3):
        _step(torch, model, opt, x, y, args.device)
    rec: dict[str, Any] = {"to_file_s": [], "to_memory_s": []}
    import io

    for _ in range(args.saves):
        t = time.perf_counter()
        state = {"model": model.state_dict(), "opt": opt.state_dict()}
        with open(args.checkpoint, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        rec["to_file_s"].append(time.perf_counter() - t)
        t = time.perf_counter()
        buf = io.BytesIO()
        torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, buf)
        rec["to_memory_s"].append(time.perf_counter() - t)
    rec["checkpoint_bytes"] = os.path.getsize(args.checkpoint)
    return rec


def _median(xs: list[float]) -> float:
    return round(statistics.median(xs), 4)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--spares", type=int, default=4, help="worker processes, one at a time")
    ap.add_argument("--generations", type=int, default=4, help="loop calls per process")
    ap.add_argument("--saves", type=int, default=3)
    ap.add_argument("--checkpoint", default="")
    ap.add_argument("--warmed", type=int, default=3,
                    help="spares that warm the device's kernels up while they wait")
    ap.add_argument("--warmup", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for name in ("batch", "image", "spares", "generations", "saves", "warmed"):
        if getattr(args, name) < (0 if name == "warmed" else 1):
            ap.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    if args.child:
        child(args)
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    import torch

    tmp = tempfile.mkdtemp(prefix="warm_restart_")
    args.checkpoint = str(Path(tmp) / "ckpt.pt")
    result: dict[str, Any] = {
        "torch": torch.__version__,
        "device": args.device,
        "gpu": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu",
        "host_cores": os.cpu_count(),
        "job": f"resnet50 batch {args.batch} {args.image}x{args.image} bf16 autocast SGD",
        "measured": time.strftime("%Y-%m-%d", time.gmtime()),
    }
    result["save"] = writer(args, torch)
    log.info("checkpoint %.0f MB", result["save"]["checkpoint_bytes"] / 1e6)
    spares = []
    for i in range(args.spares + args.warmed):
        warmed = i >= args.spares
        cmd = [sys.executable, __file__, "--child", "--out", "-", "--device", args.device,
               "--batch", str(args.batch), "--image", str(args.image),
               "--generations", str(args.generations), "--checkpoint", args.checkpoint]
        cmd += ["--warmup"] if warmed else []
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdin is not None and p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"spare {i} did not start")
        time.sleep(1.0)  # the spare idles, as a warm worker does before it is used
        p.stdin.write("go\n")
        p.stdin.flush()
        line = p.stdout.readline()
        if p.wait(timeout=600) != 0 or not line:
            raise SystemExit(f"spare {i} failed (exit {p.returncode})")
        rec = json.loads(line)
        rec["warmed_up"] = warmed
        spares.append(rec)
        g = rec["generations"]
        again_s = ", ".join(f"{x['total']:.2f}" for x in g[1:])
        kind = " (warmed up)" if warmed else ""
        log.info("spare %d%s: first run %.2f s, again %s s", i, kind, g[0]["total"], again_s)
    result["spares"] = spares
    phases = ("build_model", "to_device", "restore", "step_1", "step_2", "total")
    first = [s["generations"][0] for s in spares if not s["warmed_up"]]
    warm_first = [s["generations"][0] for s in spares if s["warmed_up"]]
    again = [g for s in spares for g in s["generations"][1:]]
    result["median_s"] = {
        "spare_first_run": {p: _median([g[p] for g in first]) for p in phases},
        "warmed_spare_first_run": (
            {p: _median([g[p] for g in warm_first]) for p in phases} if warm_first else None
        ),
        "warmup": (
            _median([s["warmup"] for s in spares if s["warmed_up"]]) if warm_first else None
        ),
        "same_worker_again": (
            {p: _median([g[p] for g in again]) for p in phases} if again else None
        ),
        "import_torch": _median([s["import_torch"] for s in spares]),
        "device_init": _median([s["device_init"] for s in spares]),
        "save_to_file": _median(result["save"]["to_file_s"]),
        "save_to_memory": _median(result["save"]["to_memory_s"]),
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    log.info("medians: %s", json.dumps(result["median_s"], indent=1))


if __name__ == "__main__":
    main()
