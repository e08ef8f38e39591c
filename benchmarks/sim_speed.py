"""Replay speed against Gavel's simulator: Gavel's 3,000-job trace on 36:36:36.

Each policy is timed as a whole ``lyra simulate`` process (interpreter start, imports,
trace and throughput loading, the replay, the JSON report), because that is what Gavel's
figure is: the wall time of its own ``simulate_scheduler_with_trace.py`` process. Gavel's
seconds (``GAVEL_SECONDS``) were measured on this kind of 2-core host and are quoted from
issue #33; Gavel's code is not shipped here, so they cannot be re-timed side by side.

The host is shared, so every policy runs ``--repeats`` times, interleaved (one pass over
the policies, then the next), and the median wall time is the figure; each run stores its
wall and CPU seconds and the 1-minute load average before it, so a reader can see how
busy the host was. Every run's average JCT (jobs 1000-1499) must be bit-identical across
the repeats; it is written beside Gavel's own (``tests/data/gavel_reference.json``).

The figure is ``lyra simulate`` as users get it: with the compiled core
(``lyra_ray/native.py``: the same modules built by mypyc; the script builds it first when
the source changed). Each policy also runs interpreted (``LYRA_NATIVE=0``), interleaved
with the compiled runs, as the baseline of what compiling buys (``--no-interpreted``
skips it); both must give the same average JCT to the bit.

The package's bytecode is compiled before the first run, as ``pip install`` does: the
hosts here set ``PYTHONDONTWRITEBYTECODE``, so a module edited since its ``.pyc`` was
written would otherwise be compiled again at every start, and the table would time the
compiler (tens of milliseconds per run) rather than the simulator.

    .venv/bin/python benchmarks/sim_speed.py [--policies a,b] [--repeats 3]

writes ``benchmarks/results/sim_speed.json`` and rewrites docs/gavel.md's ``sim-speed``
table from it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LYRA_SHARED_DATA", ROOT.parent / "shared" / "data")) / "gavel"
TRACE = SHARED / "traces" / "generated_continuous_single_seed0_lam1200_3000jobs.trace"
THROUGHPUTS = SHARED / "simulation_throughputs.json"
REFERENCE = ROOT / "tests" / "data" / "gavel_reference.json"
OUT = ROOT / "benchmarks" / "results" / "sim_speed.json"
CLUSTER = "v100=36,p100=36,k80=36"
WINDOW = "1000:1499"
TARGET = 20.0
"""Issue #33's bar: every policy at least this many times faster than Gavel's simulator."""

GAVEL_SECONDS = {
    "max_min_fairness": 200.0,
    "max_min_fairness_perf": 64.1,
    "fifo": 76.5,
    "fifo_perf": 42.5,
    "finish_time_fairness": 272.1,
    "finish_time_fairness_perf": 253.7,
}
"""Gavel's simulator on this trace and cluster, seconds of wall time per policy, on a
2-core host of the kind these benchmarks run on (issue #33)."""


PACKAGE = ROOT / "lyra_ray"
"""The installed package; its card folders (``policies/``, ``placement/``, ...) are
symbolic links inside it, which ``compileall`` does not follow: each is compiled too."""


def compile_bytecode() -> None:
    """Write every module's ``.pyc`` now (see the module doc); quiet, and an error here
    would surface at import in the timed runs anyway."""
    import compileall

    folders = [PACKAGE, *(p.resolve() for p in PACKAGE.iterdir() if p.is_symlink() and p.is_dir())]
    for folder in folders:
        compileall.compile_dir(str(folder), quiet=2)


def lyra_command() -> list[str]:
    """The ``lyra`` entry point installed beside this interpreter, else ``-m``."""
    script = Path(sys.executable).parent / "lyra"
    return [str(script)] if script.exists() else [sys.executable, "-m", "lyra_ray.cli"]


def run_once(policy: str, compiled: bool = True) -> dict[str, Any]:
    """One ``lyra simulate`` process, with the compiled core or without it
    (``LYRA_NATIVE``); its wall and CPU seconds and its summary."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "sim.json"
        cmd = [
            *lyra_command(),
            "simulate",
            "--trace",
            str(TRACE),
            "--cluster",
            CLUSTER,
            "--policy",
            policy,
            "--round-seconds",
            "360",
            "--jct-window",
            WINDOW,
            "--throughputs",
            str(THROUGHPUTS),
            "--json",
            str(out),
            "--quiet",
        ]
        load = os.getloadavg()[0]
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        env = {**os.environ, "LYRA_NATIVE": "1" if compiled else "0"}
        subprocess.run(cmd, check=True, cwd=ROOT, env=env)
        wall = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        summary = json.loads(out.read_text())
    used = bool(summary["meta"].get("compiled_core"))
    if used != compiled:
        state = "used" if used else "not used"
        raise SystemExit(f"{policy}: the compiled core was {state} (see make native)")
    return {
        "compiled_core": used,
        "wall_s": wall,
        "cpu_s": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
        "replay_wall_s": summary["wall_s"],
        "load_avg_1m_before": load,
        "avg_jct_s": summary["avg_jct_s"],
        "core_steps": summary["core_steps"],
    }


def gavel_jct(policy: str) -> float | None:
    """Gavel's average JCT (jobs 1000-1499) for this setting, from its reference run."""
    settings = json.loads(REFERENCE.read_text())["settings"]
    entry = settings.get(f"single_3000|36:36:36|{policy}", {})
    jct = entry.get("avg_jct_s")
    return None if jct is None else float(jct)


def summarise(
    policy: str, runs: list[dict[str, Any]], interpreted: list[dict[str, Any]]
) -> dict[str, Any]:
    """The compiled core's runs are the figure; the interpreted ones, run interleaved
    with them, are its baseline (their ratio: what compiling buys on this host)."""
    jcts = {r["avg_jct_s"] for r in runs + interpreted}
    if len(jcts) != 1:
        raise SystemExit(f"{policy}: the average JCT differs between runs: {sorted(jcts)}")
    wall = statistics.median(r["wall_s"] for r in runs)
    slow = statistics.median(r["wall_s"] for r in interpreted) if interpreted else None
    gavel_s = GAVEL_SECONDS.get(policy)
    jct, gjct = runs[0]["avg_jct_s"], gavel_jct(policy)
    return {
        "runs": runs,
        "median_wall_s": wall,
        "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "median_replay_wall_s": statistics.median(r["replay_wall_s"] for r in runs),
        "load_avg_1m": [r["load_avg_1m_before"] for r in runs],
        "avg_jct_s": jct,
        "gavel_avg_jct_s": gjct,
        "jct_vs_gavel": None if gjct is None else jct / gjct,
        "gavel_wall_s": gavel_s,
        "speedup_vs_gavel": None if gavel_s is None else gavel_s / wall,
        "interpreted_runs": interpreted,
        "interpreted_median_wall_s": slow,
        "compiled_vs_interpreted": None if slow is None else slow / wall,
    }


def render(d: dict[str, Any]) -> str:
    """docs/gavel.md's ``sim-speed`` table: one row per policy."""
    rows = [
        "| policy | ours, median wall (runs) | interpreted | load avg (1 min) | Gavel "
        f"| ours / Gavel (≥{d['target']:.0f}x) | avg JCT, ours | avg JCT, Gavel | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    res = d["results"]
    known = list(GAVEL_SECONDS)
    for name in sorted(res, key=lambda p: (known.index(p) if p in known else len(known), p)):
        r = res[name]
        walls = ", ".join(f"{x['wall_s']:.2f}" for x in r["runs"])
        loads = r["load_avg_1m"]
        speed = r["speedup_vs_gavel"]
        gj = r["gavel_avg_jct_s"]
        gavel_jct_text = "— | —" if gj is None else f"{gj:,.0f} s | {r['jct_vs_gavel']:.3f}"
        gs = r["gavel_wall_s"]
        slow = r.get("interpreted_median_wall_s")
        slow_text = "—" if slow is None else f"{slow:.2f} s ({r['compiled_vs_interpreted']:.2f}x)"
        rows.append(
            f"| `{name}` | {r['median_wall_s']:.2f} s ({walls}) | {slow_text} "
            f"| {min(loads):.2f}–{max(loads):.2f} "
            f"| {'—' if gs is None else f'{gs:.1f} s'} "
            f"| {'—' if speed is None else f'{speed:.1f}x'} "
            f"| {r['avg_jct_s']:,.0f} s | {gavel_jct_text} |"
        )
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--policies", default=",".join(GAVEL_SECONDS))
    ap.add_argument("--repeats", type=int, default=3, help="runs per policy (median)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument(
        "--no-interpreted",
        dest="interpreted",
        action="store_false",
        help="skip the interpreted baseline runs (LYRA_NATIVE=0)",
    )
    args = ap.parse_args()
    if not TRACE.exists():
        print(f"skipped: {TRACE} not found")
        return 0
    policies = args.policies.split(",")
    compile_bytecode()
    sys.path.insert(0, str(ROOT))
    from scripts.build_native import main as build_native

    if build_native(["--strict"]) != 0:  # a no-op when the build matches the source
        raise SystemExit("the compiled core could not be built: see above")
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    slow: dict[str, list[dict[str, Any]]] = {p: [] for p in policies}
    for i in range(args.repeats):
        for p in policies:
            for compiled in (True, False) if args.interpreted else (True,):
                r = run_once(p, compiled)
                (runs if compiled else slow)[p].append(r)
                print(
                    f"[{i + 1}/{args.repeats}] {p} ({'compiled' if compiled else 'interpreted'}):"
                    f" {r['wall_s']:.2f} s wall (replay {r['replay_wall_s']:.2f} s, "
                    f"load {r['load_avg_1m_before']:.2f}), avg JCT {r['avg_jct_s']!r}",
                    flush=True,
                )
    results = {p: summarise(p, rs, slow[p]) for p, rs in runs.items()}
    for p, r in results.items():
        speed = r["speedup_vs_gavel"]
        print(f"{p}: median {r['median_wall_s']:.2f} s, {speed and f'{speed:.1f}x'} Gavel")
    data = {
        "trace": TRACE.name,
        "cluster": CLUSTER,
        "window": WINDOW,
        "repeats": args.repeats,
        "target": TARGET,
        "timed": "whole `lyra simulate --quiet --json` processes, interleaved",
        "bytecode": "compiled before the first run (as pip install does)",
        "compiled_core": "lyra_ray/native.py (mypyc), built by scripts/build_native.py; "
        "the interpreted runs set LYRA_NATIVE=0",
        "command": " ".join(lyra_command()),
        "python": sys.version.split()[0],
        "interpreter": os.path.realpath(sys.executable),
        "cpus": os.cpu_count(),
        "load_avg_1m_end": os.getloadavg()[0],
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    if out.resolve() == OUT.resolve():
        sys.path.insert(0, str(ROOT))
        from benchmarks.docs_tables import table

        table("sim-speed").write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
