"""The live demo (`make demo`): a local fake-GPU cluster, real Ray Train jobs, all done.

1. ``lyra up --local``: a head and V100/P100/K80 nodes as ``ray start`` processes
   (dashboard on, labels, token auth as Ray defaults it), and the scheduler actor.
2. Jobs arrive two ways: ``ray job submit -- lyra submit jobs/examples/tiny.yaml``
   (a driver inside the cluster) and the Python SDK (``jobs/examples/mixed.yaml``).
3. A live table shows them queued, running on a GPU type x workers, preempted at round
   boundaries and resumed from their checkpoints (and resized, with an elastic policy).
4. Every job ends finished; ``lyra down`` stops exactly what ``lyra up`` started.

    python scripts/demo.py [--policy max_min_fairness] [--round-seconds 30]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent


def lyra(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "lyra_ray.cli", *args]
    print("$ lyra " + " ".join(args), flush=True)
    out = subprocess.run(cmd, text=True, capture_output=True, cwd=ROOT)
    print(out.stdout + out.stderr, end="", flush=True)
    if check and out.returncode != 0:
        raise SystemExit(f"lyra {args[0]} failed with exit code {out.returncode}")
    return out


def show(rows: list[dict[str, Any]], seen: dict[str, tuple[Any, ...]]) -> None:
    """Print what changed since the last look: the story of the demo."""
    for r in rows:
        a = r.get("assignment")
        key = (r["status"], a["gpu_type"] if a else None, a["workers"] if a else None)
        if seen.get(r["id"]) != key:
            where = f"{a['gpu_type']} x {a['workers']}" if a else "-"
            print(
                f"  {time.strftime('%H:%M:%S')} {r['name']:<14} {r['status']:<10} {where:<9} "
                f"steps {r['steps_done']:.0f}/{r['total_steps']:.0f} "
                f"preempted {r['num_preemptions']} resized {r['num_resizes']} "
                f"run g{r['generation']}",
                flush=True,
            )
            seen[r["id"]] = key


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="v100=1x4,p100=1x2,k80=1x2")
    ap.add_argument("--policy", default="max_min_fairness")
    ap.add_argument("--round-seconds", type=float, default=30.0)
    ap.add_argument("--timeout", type=float, default=1200.0)
    args = ap.parse_args(argv)

    home = tempfile.mkdtemp(prefix="lyra-demo-")
    os.environ["LYRA_HOME"] = home
    os.environ.setdefault("RAY_TMPDIR", f"/tmp/lyra-demo-{os.getuid()}")
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    up = lyra(
        "up",
        "--local",
        "--nodes",
        args.nodes,
        "--policy",
        args.policy,
        "--round-seconds",
        str(args.round_seconds),
    )
    dashboard = next(
        line.split("dashboard: ")[1].strip()
        for line in up.stdout.splitlines()
        if "dashboard: " in line
    )
    for line in up.stdout.splitlines():  # RAY_ADDRESS, RAY_AUTH_MODE: as a user's shell would
        if line.startswith("export "):
            key, value = line.removeprefix("export ").split("=", 1)
            os.environ[key] = value.strip()
    address = os.environ["RAY_ADDRESS"]
    ok = False
    try:
        print("$ ray job submit -- lyra submit jobs/examples/tiny.yaml", flush=True)
        subprocess.run(
            [
                str(BIN / "ray"),
                "job",
                "submit",
                "--address",
                dashboard,
                "--no-wait",
                "--",
                sys.executable,
                "-m",
                "lyra_ray.cli",
                "submit",
                str(ROOT / "jobs" / "examples" / "tiny.yaml"),
            ],
            check=True,
            cwd=ROOT,
        )
        from lyra_ray.sdk import TERMINAL, Client

        client = Client(address)
        ids = client.submit_file(ROOT / "jobs" / "examples" / "mixed.yaml")
        print(f"SDK submitted {ids}", flush=True)
        seen: dict[str, tuple[Any, ...]] = {}
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            rows = client.list()
            show(rows, seen)
            if len(rows) >= len(ids) + 2 and all(r["status"] in TERMINAL for r in rows):
                break
            time.sleep(2.0)
        lyra("status", "--address", address)
        rows = client.list()
        ok = len(rows) >= len(ids) + 2 and all(r["status"] == "finished" for r in rows)
        ok = ok and all(r["steps_done"] == r["total_steps"] for r in rows)
        preempted = sum(r["num_preemptions"] for r in rows)
        resized = sum(r["num_resizes"] for r in rows)
        print(
            f"{len(rows)} jobs, all finished with exact steps: {ok}; "
            f"preemptions {preempted}, resizes {resized}",
            flush=True,
        )
    finally:
        import ray

        ray.shutdown()
        lyra("down", check=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
