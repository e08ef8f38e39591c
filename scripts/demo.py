"""The live demo (`make demo`): training and inference share one fake-GPU cluster.

1. ``lyra up --local``: a head, training nodes (V100, T4) and an inference pool of two
   T4 servers as ``ray start`` processes, and the scheduler actor with the ``lyra``
   policy (capacity loaning + elastic training).
2. ``lyra serve deploy``: a plain Ray Serve app, a dense torch model behind an HTTP
   route (``examples/dense``, shipped from its folder as its runtime_env, no lyra import
   in it); one copy runs on each serving inference server, and lyra owns them. Each
   request runs the real model (a larger one than the example's default, so that the
   day's peak needs both servers on this CPU-only host; no modelled time).
3. Jobs arrive two ways: ``ray job submit -- lyra submit jobs/examples/tiny.yaml`` (a
   driver inside the cluster) and the Python SDK (``jobs/examples/loaning.yaml``: an
   elastic job on the inference pool's GPU type).
4. ``lyra serve load`` drives a compressed day of HTTP traffic at the service. At the
   trough an inference server is lent and the elastic job runs on it; at the peak the
   server is reclaimed, the job shrinks through a checkpoint and the replicas return;
   after the peak the server is lent again and the job grows back.
5. Every job ends finished with its exact steps, no request fails, and ``lyra down``
   stops exactly what ``lyra up`` started (``--keep``: the cluster stays up).

The operator's page (``lyra up`` prints its address, ``lyra page`` a login link) shows
it all while it runs: the GPUs, the queue, the jobs, the loans and the service.

    python scripts/demo.py [--day-s 180] [--peak-rps 20] [--keep]
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
                f"  {time.strftime('%H:%M:%S')} job {r['name']:<11} {r['status']:<9} "
                f"{where:<8} steps {r['steps_done']:.0f}/{r['total_steps']:.0f}",
                flush=True,
            )
            seen[r["id"]] = key


def show_servers(view: dict[str, Any], seen: dict[str, tuple[Any, ...]]) -> None:
    for n in view["nodes"]:
        if n["pool"] == "inference" and seen.get(n["id"]) != (n["state"],):
            print(
                f"  {time.strftime('%H:%M:%S')} server {n['id'][:8]}  {n['state']:<10} "
                f"(serving needs {view['serving']['demand_servers']})",
                flush=True,
            )
            seen[n["id"]] = (n["state"],)


def demo_service(home: Path) -> Path:
    """``examples/dense/service.yaml`` sized for the demo: a model whose real forward pass
    takes tens of milliseconds on one CPU thread, and a target of in-flight requests
    that makes the day's peak need both inference servers and its trough one."""
    import yaml

    spec = yaml.safe_load((ROOT / "examples" / "dense" / "service.yaml").read_text())
    spec["args"] = {"hidden": 1024, "layers": 8}
    spec["runtime_env"] = {"working_dir": str(ROOT / "examples" / "dense")}
    spec["target_ongoing_per_replica"] = 0.1
    out = home / "dense-service.yaml"
    out.write_text(yaml.safe_dump(spec))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", default="v100=1x2,t4=1x2")
    ap.add_argument("--inference", default="t4=2x2")
    ap.add_argument("--day-s", type=float, default=180.0, help="one compressed day")
    ap.add_argument("--peak-rps", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=1200.0)
    ap.add_argument("--keep", action="store_true", help="leave the cluster (and its page) up")
    args = ap.parse_args(argv)

    home = tempfile.mkdtemp(prefix="lyra-demo-")
    os.environ["LYRA_HOME"] = home
    os.environ.setdefault("RAY_TMPDIR", f"/tmp/lyra-demo-{os.getuid()}")
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    config = Path(home) / "lyra.yaml"
    # No reserve: with two inference servers, the default reserve would keep both serving.
    config.write_text("lyra:\n  policy: lyra\n  policy_args: {reserve_fraction: 0.0}\n")
    up = lyra(
        "up",
        "--local",
        "--nodes",
        args.nodes,
        "--inference",
        args.inference,
        "--config",
        str(config),
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
    ok, verdict = False, "it stopped early (see above)"
    link = ""
    try:
        # the page's login link, as a user gets it; open it while the demo runs
        link = lyra("page", check=False).stdout.split("\n")[0].strip()
        lyra("serve", "deploy", str(demo_service(Path(home))))
        print(
            "$ ray job submit --working-dir . --no-wait -- lyra submit jobs/examples/tiny.yaml",
            flush=True,
        )
        # Ray's own CLI: its chatter is not the demo's story, its failure is
        subprocess.run(
            [
                str(BIN / "ray"), "job", "submit", "--address", dashboard, "--working-dir", ".",
                "--no-wait", "--", "lyra", "submit", "jobs/examples/tiny.yaml",
            ],
            check=True,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        from lyra_ray.sdk import TERMINAL, Client

        client = Client(address)
        ids = client.submit_file(ROOT / "jobs" / "examples" / "loaning.yaml")
        print(f"SDK submitted {ids}", flush=True)
        load_cmd = [
            "serve", "load", "dense", "--pattern", "diurnal",
            "--period-s", str(args.day_s), "--duration-s", str(args.day_s),
            "--peak-rps", str(args.peak_rps), "--trough-fraction", "0.05",
            "--json", str(Path(home) / "load.json"),
        ]  # fmt: skip
        print("$ lyra " + " ".join(load_cmd) + "   (in the background)", flush=True)
        load = subprocess.Popen(
            [sys.executable, "-m", "lyra_ray.cli", *load_cmd],
            cwd=ROOT,
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        seen: dict[str, tuple[Any, ...]] = {}
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            view = client.overview()
            show_servers(view, seen)
            show(view["jobs"], seen)
            rows = view["jobs"]
            if (
                load.poll() is not None
                and len(rows) >= len(ids) + 2
                and all(r["status"] in TERMINAL for r in rows)
            ):
                break
            time.sleep(2.0)
        load.communicate(timeout=120)
        try:
            report = json.loads((Path(home) / "load.json").read_text())
        except (OSError, ValueError):
            report = {"count": 0, "failed": -1, "p50_ms": None, "p99_ms": None}
        p50, p99 = report["p50_ms"], report["p99_ms"]
        print(
            f"traffic: {report['count']} requests, p50 "
            f"{'-' if p50 is None else f'{p50:.0f} ms'}, p99 "
            f"{'-' if p99 is None else f'{p99:.0f} ms'}, {report['failed']} failed",
            flush=True,
        )
        lyra("status", "--address", address)
        rows = client.list()
        reclaims = client.overview()["serving"]["reclaims"]
        ok = len(rows) >= len(ids) + 2 and all(r["status"] == "finished" for r in rows)
        ok = ok and all(r["steps_done"] == r["total_steps"] for r in rows)
        ok = ok and report["failed"] == 0 and bool(reclaims)
        resized = sum(r["num_resizes"] for r in rows)
        verdict = (
            f"{len(rows)} jobs finished with exact steps, {len(reclaims)} reclaim(s) of a "
            f"lent server, {resized} resize(s), {report['failed']} failed request(s)"
        )
    finally:
        from lyra_ray.ops.embedded import disconnect

        disconnect()
        if not args.keep:
            lyra("down", check=False)
    print(f"demo {'OK' if ok else 'FAILED'}: {verdict}")
    if args.keep:
        print(f"where to look: the operator's page, {link or '(see `lyra page`)'}")
        print(f"  the cluster is still up: `LYRA_HOME={home} lyra down` stops it")
    else:
        print(f"where to look: the operator's page was at {link or '(not started)'} while")
        print("  the demo ran; `make demo` ends with `lyra down`: run `python scripts/demo.py")
        print("  --keep` to leave it up, or `lyra up --local` then `lyra page` for your own link")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
