"""Run Gavel's own simulator and keep its figures in ``tests/data/gavel_reference.json``.

The fidelity tests (``tests/sim/test_gavel_reference.py``) and the benchmark
(``benchmarks/gavel_fidelity.py``) hold lyra-ray's simulator to these numbers. They come
from Gavel itself, not from memory: this script calls Gavel's trace driver
(``scripts/drivers/simulate_scheduler_with_trace.py``) in a checkout you give it, parses
the per-job completion times it prints, and records average, median and p95 with the
exact command that made them. No Gavel code is copied here; Gavel runs in its own
interpreter (its dependencies — cvxpy, ECOS, cvxopt for GLPK_MI — stay out of lyra-ray's
environment).

    python scripts/gavel_reference.py --gavel /work/gavel-src/scheduler \\
        --python /work/gavel-venv/bin/python [--only "TRACE|CLUSTER|POLICY" ...] [--timeout 3600]

Each setting is (trace, cluster v100:p100:k80, policy) with ``--seed 0`` and 360 s rounds
(Gavel's defaults). The generated traces are measured over a window of job ids (Gavel's
``-s/-e``, end exclusive), as the paper measures a steady state, not the warm-up.
Existing entries are kept unless re-run; a failed run is recorded with its error so the
table says what Gavel could not do.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "gavel_reference.json"
SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT.parent / "shared" / "data")) / "gavel"

TRACES: dict[str, tuple[str, tuple[int, int] | None]] = {
    # name -> (file under shared/data/gavel/traces, job-id window, inclusive)
    "max_min_fairness": ("max_min_fairness.trace", None),
    "single_3000": ("generated_continuous_single_seed0_lam1200_3000jobs.trace", (1000, 1499)),
    "multi_2000": ("generated_continuous_multiple_seed0_lam1800_2000jobs.trace", (300, 599)),
}
CLUSTERS = ("8:16:24", "36:36:36")
POLICIES = (
    "fifo",
    "fifo_perf",
    "fifo_packed",
    "max_min_fairness",
    "max_min_fairness_perf",
    "max_min_fairness_packed",
    "finish_time_fairness",
    "finish_time_fairness_perf",
    "finish_time_fairness_packed",
    "min_total_duration",
    "min_total_duration_perf",
    "min_total_duration_packed",
    "max_min_fairness_water_filling",
    "max_min_fairness_water_filling_perf",
    "max_min_fairness_water_filling_packed",
    "max_sum_throughput_perf",
    "max_sum_throughput_normalized_by_cost_perf",
    "max_sum_throughput_normalized_by_cost_perf_SLOs",
    "max_sum_throughput_normalized_by_cost_packed_SLOs",
    "isolated",
    "gandiva",
    "allox",
)
_JOB = re.compile(r"^Job (\d+)(?: \(high priority\))?: ([0-9.]+)$")


def key(trace: str, cluster: str, policy: str) -> str:
    return f"{trace}|{cluster}|{policy}"


def command(trace: str, cluster: str, policy: str) -> list[str]:
    """Gavel's driver invocation, with ``$SHARED`` for lyra-ray's shared data folder."""
    file, window = TRACES[trace]
    cmd = [
        "scripts/drivers/simulate_scheduler_with_trace.py",
        "-t",
        f"$SHARED/gavel/traces/{file}",
        "-p",
        policy,
        "-c",
        cluster,
        "--seed",
        "0",
        "--throughputs_file",
        "$SHARED/gavel/simulation_throughputs.json",
    ]
    if window is not None:
        cmd += ["-s", str(window[0]), "-e", str(window[1] + 1)]
    return cmd


def stats(jcts: list[float]) -> dict[str, float]:
    a = np.asarray(jcts, dtype=float)
    return {
        "avg_jct_s": float(a.mean()),
        "median_jct_s": float(np.median(a)),
        "p95_jct_s": float(np.percentile(a, 95)),
    }


def run_one(
    gavel: Path, python: str, trace: str, cluster: str, policy: str, timeout: int
) -> dict[str, Any]:
    cmd = command(trace, cluster, policy)
    argv = ["nice", "-n", "19", python] + [c.replace("$SHARED", str(SHARED.parent)) for c in cmd]
    entry: dict[str, Any] = {
        "trace": TRACES[trace][0],
        "window": list(TRACES[trace][1]) if TRACES[trace][1] else None,
        "cluster": cluster,
        "policy": policy,
        "command": "cd $GAVEL/scheduler && python " + " ".join(cmd),
    }
    t0 = time.perf_counter()
    # Gavel logs every micro-task to stderr (hundreds of MB on long traces): it goes to a
    # temporary file, of which only a failure's last lines are kept.
    with tempfile.TemporaryFile() as err:
        try:
            res = subprocess.run(
                argv, cwd=gavel, stdout=subprocess.PIPE, stderr=err, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            entry["error"] = f"did not finish within {timeout} s"
            return entry
        err.seek(max(0, err.seek(0, os.SEEK_END) - 4000))
        tail = err.read().decode(errors="replace").strip().splitlines()[-3:]
    entry["gavel_wall_s"] = round(time.perf_counter() - t0, 1)
    out = res.stdout.decode(errors="replace").splitlines()
    jcts = {int(m.group(1)): float(m.group(2)) for line in out if (m := _JOB.match(line))}
    if res.returncode != 0 or not jcts:
        entry["error"] = f"exit {res.returncode}: " + " | ".join(tail)
        return entry
    entry.update(stats(list(jcts.values())))
    entry["jobs"] = len(jcts)
    return entry


def versions(python: str) -> dict[str, str]:
    code = (
        "import json, importlib.metadata as m\n"
        "print(json.dumps({p: m.version(p) for p in "
        "('cvxpy', 'ecos', 'cvxopt', 'numpy', 'scipy')}))"
    )
    res = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    out: dict[str, str] = json.loads(res.stdout)
    out["python"] = subprocess.run(
        [python, "-c", "import sys; print(sys.version.split()[0])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return out


def gavel_commit(gavel: Path) -> str | None:
    marker = gavel / ".." / "GAVEL_COMMIT"
    return marker.read_text().strip() if marker.exists() else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gavel", type=Path, required=True, help="Gavel checkout's scheduler/ dir")
    ap.add_argument("--python", default=sys.executable, help="interpreter with Gavel's deps")
    ap.add_argument("--only", nargs="*", help="TRACE|CLUSTER|POLICY keys to (re)run")
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    data: dict[str, Any] = json.loads(args.out.read_text()) if args.out.exists() else {}
    settings = data.setdefault("settings", {})
    wanted = args.only or [key(t, c, p) for t in TRACES for c in CLUSTERS for p in POLICIES]
    data["gavel"] = {
        "repository": "github.com/stanford-futuredata/gavel",
        "commit": gavel_commit(args.gavel) or data.get("gavel", {}).get("commit"),
        "driver": "scheduler/scripts/drivers/simulate_scheduler_with_trace.py",
        "environment": versions(args.python),
        "defaults": "360 s rounds, 1920 s minimum between allocation resets, 1 GPU per server",
    }
    env = data["gavel"]["environment"]
    for k in wanted:
        trace, cluster, policy = k.split("|")
        entry = run_one(args.gavel, args.python, trace, cluster, policy, args.timeout)
        entry["environment"] = env
        settings[k] = entry
        shown = entry.get("avg_jct_s", entry.get("error"))
        print(f"{k}: {shown}", flush=True)
        args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
