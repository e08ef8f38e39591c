"""How long a reclaimed server waits for its copy of a user's Serve application: deployed
by the service's warm builder, against a fresh task, side by side in one run.

Why: a lent server that serving takes back serves again only once its copy of every
service runs there, and training leaves it in under a second; the copy is the wait. A
copy was deployed by a fresh Ray task with the service's runtime env, which started a
process and imported the user's module every time; the warm builder
(``lyra_ray.serving.app_build.CopyBuilder``) keeps both. Measured, each round, on an
embedded cluster with one inference server, the test suite's user app (a FastAPI ingress
in front of a PyTorch model, ``tests/ray/user_app.py``), from the deploy's start to
Serve reporting the copy RUNNING (its replicas started, which both paths wait for alike):

- ``task``: a fresh :func:`~lyra_ray.serving.app_build.deploy_copy_task` (the old path,
  and the path after a builder died);
- ``builder``: the service's builder, already started (every copy after the first);
- ``new builder``: a builder started for this copy (a service's first copy).

Each copy is deleted (and waited gone) before the next; one copy by each path before the
rounds is not counted (the package's first unpack, Serve's first deploy). Paths are
interleaved so that a host that speeds up or slows down weighs on all alike. Stored:
each path's median, its ratio to ``task``, and the samples, appended to
``benchmarks/results/copy_deploy.json`` (``docs/loaning.md``'s table).

    .venv/bin/python -m benchmarks.copy_deploy --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "copy_deploy.json"
PATHS = ("task", "builder", "new builder")
TIMEOUT_S = 120.0


def _wait(what: str, done: Any, state: Any = None) -> None:
    """Poll ``done()``; after :data:`TIMEOUT_S` raise, saying what ``state()`` shows."""
    deadline = time.monotonic() + TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            shown = f": {state()}" if state is not None else ""
            raise TimeoutError(f"timed out after {TIMEOUT_S:g} s waiting for {what}{shown}")
        time.sleep(0.05)


def measure(rounds: int) -> dict[str, list[float]]:
    """Each path's seconds from the deploy's start to the copy RUNNING, ``rounds`` each."""
    os.environ.setdefault("RAY_TMPDIR", f"/tmp/lyra-copy-deploy-{os.getuid()}")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    import ray
    from ray import serve

    from benchmarks._scratch_cluster import scratch_cluster
    from lyra_ray.client.quiet import quiet_loggers
    from lyra_ray.client.user_env import upload
    from lyra_ray.ops.ports import free_port
    from lyra_ray.runtime.serve_proxy import ServeProxy
    from lyra_ray.runtime.service_copies import HEAD
    from lyra_ray.serving.app_build import CopyBuilder, deploy_copy_task
    from tests.ray.user_app import write_app

    quiet_loggers()  # Serve's own INFO lines ("Deleting app ...") between the rounds
    out: dict[str, list[float]] = {p: [] for p in PATHS}
    with (
        tempfile.TemporaryDirectory(prefix="lyra-copy-deploy-") as d,
        scratch_cluster((), [("t4", 1)]),
    ):
        folder = write_app(Path(d) / "shop")
        env = upload({"working_dir": str(folder)})
        args = {"calls_dir": str(Path(d) / "calls"), "delay_ms": 0}
        source = {"import_path": "shop:build", "args": args, "runtime_env": env}
        (node,) = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("GPU")]
        ServeProxy(port=free_port()).start()
        warm = CopyBuilder.options(  # type: ignore[attr-defined]
            runtime_env=env, resources=HEAD
        ).remote(source)

        def one(path: str, i: int) -> float:
            name, route = f"copy-{i}", f"/copy-{i}"
            t0 = time.monotonic()
            if path == "task":
                opts = deploy_copy_task.options(runtime_env=env, resources=HEAD)
                reply = ray.get(opts.remote(source, name, route, node, {}), timeout=TIMEOUT_S)
            else:
                builder = warm
                if path == "new builder":
                    builder = CopyBuilder.options(  # type: ignore[attr-defined]
                        runtime_env=env, resources=HEAD
                    ).remote(source)
                reply = ray.get(builder.deploy.remote(name, route, node, {}), timeout=TIMEOUT_S)
                if builder is not warm:
                    ray.kill(builder)
            if not reply.get("ok"):
                raise RuntimeError(f"{path}: {reply.get('error')}")

            def running() -> bool:  # as the serving pool reads it (runtime/serving.py)
                app = serve.status().applications.get(name)
                return app is not None and str(app.status).endswith("RUNNING")

            def state() -> str:
                app = serve.status().applications.get(name)
                if app is None:
                    return "not in Serve's status"
                deps = {d: (str(v.status), v.message) for d, v in app.deployments.items()}
                return f"{app.status} {app.message!r} {deps}"

            _wait(f"{name} running ({path})", running, state)
            took = time.monotonic() - t0
            serve.delete(name)
            _wait(f"{name} deleted", lambda: name not in serve.status().applications)
            return took

        i = 0
        for r in range(rounds + 1):
            for path in PATHS:
                took = one(path, i)
                i += 1
                if r:  # round 0 warms the package and Serve up
                    out[path].append(took)
            if r:
                sys.stderr.write(
                    f"round {r}/{rounds}: "
                    + ", ".join(f"{p} {v[-1]:.2f} s" for p, v in out.items())
                    + "\n"
                )
        ray.kill(warm)
    return out


def summarise(samples: dict[str, list[float]]) -> dict[str, Any]:
    """Each path's median seconds and its ratio to the fresh task's."""
    medians = {p: statistics.median(v) for p, v in samples.items()}
    base = medians["task"]
    return {
        p: {
            "median_s": round(m, 2),
            "vs_task": round(m / base, 2) if base > 0 else None,
            "samples": [round(x, 2) for x in samples[p]],
        }
        for p, m in medians.items()
    }


def main(argv: list[str] | None = None) -> int:
    from benchmarks._runs_file import append_run, new_run, rounds_type

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=rounds_type(50), default=5, help="copies by each path")
    ap.add_argument("--note", default="", help="what ran beside it, the host's load")
    ap.add_argument("--out", type=Path, default=OUT, help="the results JSON (appended to)")
    args = ap.parse_args(argv)
    run = new_run(args.note)
    paths = summarise(measure(args.rounds))
    run.update(rounds=args.rounds, paths=paths)
    append_run(args.out, run)
    if args.out.resolve() == OUT:  # the docs' table is the stored results'
        from benchmarks.docs_tables import table

        table("copy-deploy").write()
    sys.stderr.write(
        "copy deploy, median s: "
        + ", ".join(f"{p} {v['median_s']:.2f} ({v['vs_task']:.2f}x)" for p, v in paths.items())
        + f" -> {args.out}\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
