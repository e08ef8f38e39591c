"""The head node dies and comes back, several times, at full size (issue #45, item 3).

Runs ``tests/chaos/test_head_recovery.py`` ``--runs`` times in turn (each its own cluster:
a Redis, the head from cluster.yaml's head commands, a k80 and a t4 inference worker, a
service and three jobs of 300 steps), gathers each run's recovery times into
``benchmarks/results/head_recovery.json`` and rewrites the table of docs/reliability.md.
``make test`` runs the same test once with 80-step jobs; ``--short`` runs that size here.

    python benchmarks/head_recovery.py [--runs 3] [--short]

Every command that starts a cluster runs under ``flock /tmp/lyra-live.lock``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
OUT = ROOT / "benchmarks" / "results" / "head_recovery.json"
TEST = "tests/chaos/test_head_recovery.py"
PYTEST = f".venv/bin/python -m pytest -q -p no:cacheprovider {TEST}"


def run_once(out: Path, short: bool) -> dict[str, Any]:
    env = {**os.environ, "LYRA_CHAOS": "short" if short else "full", "LYRA_CHAOS_OUT": str(out)}
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    cmd = ["flock", "/tmp/lyra-live.lock", sys.executable, "-m", "pytest", "-q"]
    cmd += ["-p", "no:cacheprovider", TEST]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    f = out / "head_recovery.json"
    figures = json.loads(f.read_text()) if f.exists() and proc.returncode == 0 else None
    return {
        "exit_code": proc.returncode,
        "wall_s": round(time.monotonic() - t0, 1),
        "figures": figures,
        **({"output_tail": (proc.stdout + proc.stderr)[-3000:]} if proc.returncode else {}),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--short", action="store_true", help="make test's size: 80-step jobs")
    args = ap.parse_args(argv)
    if not 1 <= args.runs <= 20:
        ap.error("--runs: 1 to 20")
    runs = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="lyra-head-") as tmp:
            r = run_once(Path(tmp), args.short)
        print(f"run {i + 1}: exit {r['exit_code']}, {r['wall_s']} s", flush=True)
        runs.append(r)
    result = {
        "command": ("LYRA_CHAOS=short " if args.short else "LYRA_CHAOS=full ") + PYTEST,
        "host": os.uname().nodename,
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "runs": runs,
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    from benchmarks.docs_tables import table

    table("head-recovery").write()
    print(f"wrote {OUT.relative_to(ROOT)} and the table of docs/reliability.md")
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
