"""``python -m lyra_ray.profiling``: the measuring core alone, with torch and nothing else.

For a GPU machine where Ray and the rest of lyra are not installed: copy the project
(or only ``lyra_ray/`` and ``jobs/``) there and run, from its root::

    python -m lyra_ray.profiling --job-types resnet18,lm --json out.json

Every catalogue job type named is measured on this machine's first GPU (or the CPU),
alone and in pairs, into Gavel's throughput JSON under the GPU's type (``--gpu-type``,
else read from the device name, e.g. ``h200``). ``lyra profile predict`` fills the
pairs ``--pairs K`` left out; ``lyra up --throughputs`` seeds a scheduler with it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from typing import Any

from lyra_ray.profiling.core import measure
from lyra_ray.profiling.meter import MeterSettings
from lyra_ray.profiling.plan import ProfiledJob, plan, table


def gpu_type_name() -> str:
    """``h200`` from "NVIDIA H200", ``a100`` from "NVIDIA A100-SXM4-80GB"; ``cpu``."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    name = torch.cuda.get_device_name(0).lower().replace("nvidia", "").strip()
    m = re.search(r"[a-z]+\d+[a-z]?", name.replace("geforce", "").replace(" ", ""))
    return m.group(0) if m else re.sub(r"\W+", "-", name)


def main(argv: list[str] | None = None) -> int:
    from lyra_ray.jobs.models import JOB_TYPES

    p = argparse.ArgumentParser(prog="python -m lyra_ray.profiling", description=__doc__)
    p.add_argument("--job-types", default=",".join(JOB_TYPES))
    p.add_argument("--json", required=True, metavar="FILE")
    p.add_argument("--gpu-type", help="the name to file the rates under (default: the device's)")
    p.add_argument("--size", choices=("auto", "tiny", "real"), default="auto")
    p.add_argument("--pairs", type=int, metavar="K", help="K pairs per job (default: all)")
    p.add_argument("--warmup-s", type=float, default=3.0)
    p.add_argument("--window-s", type=float, default=3.0)
    p.add_argument("--max-windows", type=int, default=8)
    args = p.parse_args(argv)
    types = [t.strip() for t in args.job_types.split(",") if t.strip()]
    bad = [t for t in types if t not in JOB_TYPES]
    if bad or not types:
        p.error(f"--job-types: unknown {bad}; known: {', '.join(JOB_TYPES)}")
    if args.pairs is not None and args.pairs < 1:
        p.error("--pairs: must be at least 1")
    gpu = args.gpu_type or gpu_type_name()
    settings = MeterSettings(args.warmup_s, args.window_s, 0.05, args.max_windows)
    jobs = [ProfiledJob(t, {"job_type": t, "size": args.size}) for t in types]
    todo = plan(jobs, {gpu: 1}, args.pairs)
    results: dict[str, list[dict[str, Any]]] = {}
    for i, m in enumerate(todo, 1):
        sys.stderr.write(f"[{i}/{len(todo)}] {gpu} {' + '.join(m.jobs)} ... ")
        sys.stderr.flush()
        res = measure([jobs[types.index(k)].side for k in m.jobs], settings)
        results[m.id] = res
        sys.stderr.write(
            " / ".join(str(r.get("error")) if "error" in r else f"{r['rate']:.2f}" for r in res)
            + "\n"
        )
    import torch

    out = table(
        todo,
        results,
        {
            "source": "python -m lyra_ray.profiling",
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
            "torch": torch.__version__,
            "size": args.size,
            "settings": settings.to_dict(),
        },
    )
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    missing = out["provenance"]["missing"]
    sys.stderr.write(
        f"wrote {args.json}: {len(todo) - len(missing)} of {len(todo)} measurements on {gpu}\n"
    )
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
