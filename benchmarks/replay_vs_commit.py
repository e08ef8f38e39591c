"""The 3,000-job replay, this tree against another commit, side by side in one run.

A change to the scheduling loop must not move the replay's average JCT and must not
slow it down. Two versions of the same packages cannot share one interpreter, so each
replay runs in a child process: the base commit from a temporary ``git worktree``, this
tree as it is, alternated ``--repeats`` times so that load on the shared host hits both
alike. Reported: per policy, each side's median CPU seconds, their ratio, and whether
the average JCTs are identical. Written to ``benchmarks/results/replay_vs_commit.json``.

    .venv/bin/python benchmarks/replay_vs_commit.py --base 15578ee --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TRACE = "generated_continuous_single_seed0_lam1200_3000jobs.trace"

# Runs inside the child, whose working directory is the tree under test; the imports
# fall back to the flat layout that commits before the package split used.
_CHILD = r"""
import json, sys, time
from pathlib import Path
sys.path.insert(0, ".")
try:
    from lyra_ray.model.spec import parse_cluster
    from lyra_ray.model.throughput import load_gavel_throughputs
except ImportError:
    from lyra_ray.spec import parse_cluster
    from lyra_ray.throughput import load_gavel_throughputs
import lyra_ray
from lyra_ray.sim.simulator import Simulator
from lyra_ray.sim.traces import read_gavel_trace
if Path("lyra_ray/policies").exists():  # the card's folders under the project's namespace
    from lyra_ray.policies.base import get_policy
else:  # commits before they were: top-level packages of the tree
    from policies.base import get_policy
shared = Path(sys.argv[1])
model = load_gavel_throughputs(shared / "simulation_throughputs.json")
specs = read_gavel_trace(shared / "traces" / sys.argv[2], known_job_types=model.job_types)
nodes = parse_cluster("v100=36,p100=36,k80=36")
t0, c0 = time.perf_counter(), time.process_time()
res = Simulator(nodes, get_policy(sys.argv[3]), model, round_s=360).run(specs, (1000, 1499))
print(json.dumps({
    "cpu_s": time.process_time() - c0,
    "wall_s": time.perf_counter() - t0,
    "avg_jct_s": res.summary["avg_jct_s"],
    "completed_jobs": res.summary["completed_jobs"],
    "package": lyra_ray.__file__,
}))
"""


def _replay(tree: Path, shared: Path, policy: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(shared), TRACE, policy],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"replay in {tree} failed:\n{out.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if not str(result["package"]).startswith(str(tree)):
        raise RuntimeError(f"replay in {tree} imported {result['package']}")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="HEAD", help="the commit to compare against (HEAD)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--policies", default="max_min_fairness_perf,fifo_nonpreemptive")
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "data" / "gavel"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "replay_vs_commit.json"))
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    shared = Path(args.shared)
    if not (shared / "traces" / TRACE).exists():
        print(f"skipped: {shared / 'traces' / TRACE} not found")
        return 0
    base_rev = subprocess.run(
        ["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True
    )
    if base_rev.returncode != 0:
        ap.error(f"--base: not a commit here: {args.base!r}")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lyra-base-") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.base],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            for policy in args.policies.split(","):
                runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
                for i in range(args.repeats):
                    order = [("base", base), ("this", ROOT)]
                    for side, tree in order if i % 2 == 0 else order[::-1]:
                        r = _replay(tree, shared, policy)
                        runs[side].append(r)
                        print(
                            f"{policy} {side} #{i + 1}: cpu {r['cpu_s']:.2f} s, "
                            f"avg JCT {r['avg_jct_s']!r}",
                            flush=True,
                        )
                cpu = {s: statistics.median(r["cpu_s"] for r in runs[s]) for s in runs}
                jct = {s: runs[s][0]["avg_jct_s"] for s in runs}
                results[policy] = {
                    "base_cpu_s_median": cpu["base"],
                    "this_cpu_s_median": cpu["this"],
                    "this_over_base_cpu": cpu["this"] / cpu["base"],
                    "base_avg_jct_s": jct["base"],
                    "this_avg_jct_s": jct["this"],
                    "jct_identical": jct["base"] == jct["this"],
                    "runs": runs,
                }
                print(
                    f"{policy}: this/base CPU {cpu['this'] / cpu['base']:.3f}, "
                    f"JCT identical: {jct['base'] == jct['this']}"
                )
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False
            )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {"base": base_rev.stdout.strip(), "trace": TRACE, "results": results},
            indent=1,
            sort_keys=True,
        )
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
