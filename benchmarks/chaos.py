"""The reliability campaign (issue #17), full size, in one command.

Runs, one after another (never two Ray clusters at once): the hostile-input fuzzing
(1,000+ cases per target), the SQLite kill loop, the live fault scenarios (scheduler
crashes, a lost node, a killed Train worker, hostile payloads, a whole-cluster restart),
serving under faults (a Serve replica, an ingress, the scheduler mid-reclaim and an
inference server killed under open-loop traffic; its own table),
the bounded-state benchmark (10,000 finished jobs) and the load benchmark (1,000
submissions from 10 clients across a scheduler restart). Every step writes its figures
as JSON; this script gathers them into ``benchmarks/results/chaos.json`` and rewrites
the table of ``docs/reliability.md`` between its markers, each figure beside the
command that produced it. ``make test`` runs the short version of the same tests.

    python benchmarks/chaos.py [--only fuzz,store,live,restart,serving,state,load]
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
RESULTS = ROOT / "benchmarks" / "results"
DOC = ROOT / "docs" / "reliability.md"
LOGS = Path(tempfile.gettempdir()) / "lyra-chaos-logs"
PY = ".venv/bin/python"
PYTEST = f"{PY} -m pytest -q -p no:cacheprovider"


def steps(examples: int, kills: int) -> dict[str, tuple[str, dict[str, str]]]:
    """Each step: (command as a user types it, environment it sets)."""
    fuzz = {"LYRA_FUZZ_EXAMPLES": str(examples)}
    return {
        "fuzz": (
            f"{PYTEST} tests/unit/test_fuzz_inputs.py tests/unit/test_fuzz_boundary.py",
            fuzz,
        ),
        "store": (f"{PYTEST} tests/unit/test_store_crash.py", {"LYRA_CHAOS_KILLS": str(kills)}),
        "live": (f"{PYTEST} tests/chaos/test_chaos_live.py", {"LYRA_CHAOS": "full", **fuzz}),
        "restart": (f"{PYTEST} tests/chaos/test_chaos_restart.py", {"LYRA_CHAOS": "full"}),
        "serving": (f"{PYTEST} tests/chaos/test_chaos_serving.py", {"LYRA_CHAOS": "full"}),
        "state": (f"{PY} benchmarks/chaos_state.py --finished 10000", {}),
        "load": (f"{PY} benchmarks/chaos_load.py --submissions 1000 --clients 10", {}),
    }


def shown(cmd: str, env: dict[str, str]) -> str:
    return " ".join([*(f"{k}={v}" for k, v in env.items()), cmd])


def run_step(name: str, cmd: str, env: dict[str, str], out: Path) -> dict[str, Any]:
    full = {**os.environ, **env, "LYRA_CHAOS_OUT": str(out), "PYTHONUNBUFFERED": "1"}
    full.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    t0 = time.monotonic()
    print(f"== {name}: {shown(cmd, env)}", flush=True)
    argv = cmd.split()
    if argv[0] == PY:  # run with this interpreter, show what a user types
        argv[0] = sys.executable
    proc = subprocess.run(argv, cwd=ROOT, env=full, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    LOGS.mkdir(parents=True, exist_ok=True)
    (LOGS / f"{name}.log").write_text(text)  # the whole output, for a failure's details
    errors = [ln for ln in text.splitlines() if ln.startswith(("E ", "FAILED", ">"))]
    tail = "\n".join(errors[:60]) + "\n...\n" + text[-1500:]
    print(tail if proc.returncode else proc.stdout[-400:], flush=True)
    return {
        "command": shown(cmd, env),
        "exit_code": proc.returncode,
        "wall_s": round(time.monotonic() - t0, 1),
        **({"output_tail": tail} if proc.returncode else {}),
    }


def gather(out: Path) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for f in sorted(out.glob("*.json")):
        found[f.stem] = json.loads(f.read_text())
    for name in ("chaos_state", "chaos_load"):
        f = RESULTS / f"{name}.json"
        if f.exists():  # the per-cycle samples stay in their own file
            found[name] = {k: v for k, v in json.loads(f.read_text()).items() if k != "cycles"}
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="fuzz,store,live,restart,serving,state,load")
    ap.add_argument("--examples", type=int, default=1000, help="hypothesis cases per target")
    ap.add_argument("--kills", type=int, default=200, help="SIGKILLs of the SQLite writer")
    ap.add_argument("--out", default=str(RESULTS / "chaos.json"))
    args = ap.parse_args(argv)
    table = steps(args.examples, args.kills)
    chosen = [s for s in args.only.split(",") if s]
    unknown = sorted(set(chosen) - set(table))
    if unknown:
        ap.error(f"--only: unknown step(s) {unknown}; known: {sorted(table)}")
    previous = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    ran: dict[str, Any] = dict(previous.get("steps", {}))
    figures: dict[str, Any] = dict(previous.get("figures", {}))
    with tempfile.TemporaryDirectory(prefix="lyra-chaos-") as tmp:
        for name in chosen:
            cmd, env = table[name]
            ran[name] = run_step(name, cmd, env, Path(tmp))
        figures.update(gather(Path(tmp)))
    result = {"host": os.uname().nodename, "cpus": os.cpu_count(), "steps": ran, "figures": figures}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2, default=str) + "\n")
    from benchmarks.docs_tables import table

    table("chaos-table").write()
    table("chaos-serving").write()
    print(f"wrote {args.out} and the tables of {DOC.relative_to(ROOT)}")
    return 0 if all(s["exit_code"] == 0 for s in ran.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
