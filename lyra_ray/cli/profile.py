"""``lyra profile``: measure throughputs on the live cluster, or predict missing pairs.

``lyra profile run --job-types resnet18,lm --json FILE`` measures catalogue job types;
``lyra profile run JOBS.yaml --json FILE`` measures a user's own jobs (their entrypoints
and runtime envs), each on every training GPU type of the cluster, alone and in pairs.
The measurements run as lyra jobs through the scheduler (admin only). Whatever was
measured is written even when the time cap or a failure cuts the profile short; what
is missing is listed under ``provenance.missing`` and the command exits 1.
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lyra_ray.model.errors import InputError
from lyra_ray.profiling.meter import MeterSettings
from lyra_ray.profiling.plan import Measurement, ProfiledJob, plan, table, worker_counts

SIZES = ("auto", "tiny", "real")


def register(sub: Any) -> None:
    p = sub.add_parser("profile", help="measure throughputs (alone and in pairs) on the cluster")
    psub = p.add_subparsers(dest="profile_command", metavar="COMMAND", required=True)
    r = psub.add_parser("run", help="measure jobs on every GPU type of the live cluster")
    r.add_argument("jobs", nargs="?", help="a job file of your own jobs (YAML, with entrypoints)")
    r.add_argument("--job-types", help="catalogue job types, e.g. resnet18,lm")
    r.add_argument("--json", required=True, metavar="FILE", help="where to write the table")
    r.add_argument("--address", default=None)
    r.add_argument("--gpu-types", help="only these GPU types of the cluster, e.g. v100,k80")
    r.add_argument(
        "--pairs", type=int, metavar="K", help="measure K pairs per job, predict the rest"
    )
    r.add_argument("--max-minutes", type=float, default=60.0, help="time cap (default 60)")
    r.add_argument(
        "--size",
        choices=SIZES,
        default="auto",
        help="catalogue models' shapes: real or tiny (CPU-sized); auto (default): "
        "real where a worker sees a CUDA GPU, tiny on fake GPUs",
    )
    r.add_argument("--workers", default="1", help="catalogue types' worker counts, e.g. 1,2")
    r.add_argument("--warmup-s", type=float, default=3.0, help="stepped before measuring")
    r.add_argument("--window-s", type=float, default=3.0, help="one measuring window")
    r.add_argument("--max-windows", type=int, default=8, help="windows before giving up")
    r.set_defaults(func=_run)
    try:
        from lyra_ray.cli.profile_predict import add_predict_parser
    except ModuleNotFoundError:  # pragma: no cover - the predictor ships with the project
        return
    add_predict_parser(psub)


def _positive(name: str, v: float | None, whole: bool = False, most: float = 1e6) -> None:
    """A number in (0, ``most``]: infinities, NaNs and sizes no measurement needs are
    refused here rather than overflowing a timeout later."""
    if v is None:
        return
    if not math.isfinite(v) or not 0 < v <= most or (whole and v != int(v)):
        kind = "a whole number" if whole else "a number"
        raise InputError(f"{name}: must be {kind} in (0, {most:g}], got {v}")


def profiled_jobs(args: argparse.Namespace) -> list[ProfiledJob]:
    """The jobs the command names, checked before anything touches the cluster."""
    from lyra_ray.jobs.models import JOB_TYPES

    jobs: list[ProfiledJob] = []
    try:
        counts = tuple(sorted({int(x) for x in str(args.workers).split(",") if x.strip()}))
    except ValueError:
        raise InputError(f"--workers: expected counts like 1,2,4, got {args.workers!r}") from None
    if not counts or counts[0] < 1 or counts[-1] > 1024:
        raise InputError(f"--workers: counts must be in [1, 1024], got {args.workers!r}")
    for t in [t.strip() for t in (args.job_types or "").split(",") if t.strip()]:
        if t not in JOB_TYPES:
            raise InputError(f"--job-types: unknown job type {t!r}; known: {', '.join(JOB_TYPES)}")
        jobs.append(
            ProfiledJob(
                t,
                {"job_type": t, "size": args.size},
                counts,
                entrypoint="lyra_ray.jobs.catalogue_loop:train_loop",
                config={"job_type": t, "size": args.size},
            )
        )
    if args.jobs:
        from lyra_ray.model.spec import load_job_entries, parse_job_spec

        for e in load_job_entries(args.jobs):
            where = f"{args.jobs}: job {e['name']!r}"
            if not e.get("entrypoint"):
                raise InputError(f"{where}: field 'entrypoint': a profiled job must run code")
            spec = parse_job_spec(e, where)
            jobs.append(
                ProfiledJob(
                    str(e["name"]),
                    {"entrypoint": e["entrypoint"], "config": dict(e.get("config") or {})},
                    (spec.min_workers, spec.max_workers),
                    runtime_env=dict(e.get("runtime_env") or {}),
                    entrypoint=str(e["entrypoint"]),
                    config=dict(e.get("config") or {}),
                )
            )
    if not jobs:
        raise InputError("profile run: name jobs: a job file, or --job-types TYPE,...")
    keys = [j.key for j in jobs]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise InputError(f"profile run: job names must be unique, repeated: {dup}")
    return jobs


def _cluster_gpus(c: Any, only: str | None) -> dict[str, int]:
    """GPUs per type in the training pool (what a profiling job can hold)."""
    gpus: dict[str, int] = {}
    for n in c.overview()["nodes"]:
        if n.get("pool", "training") == "training" and n["gpus"] > 0:
            gpus[n["gpu_type"]] = gpus.get(n["gpu_type"], 0) + int(n["gpus"])
    if only:
        want = [g.strip().lower() for g in only.split(",") if g.strip()]
        lacking = [g for g in want if g not in gpus]
        if lacking:
            raise InputError(f"--gpu-types: the cluster has no {lacking}; it has {sorted(gpus)}")
        gpus = {g: gpus[g] for g in want}
    if not gpus:
        raise InputError("profile run: the cluster has no training GPUs")
    return gpus


def profiling_entries(
    jobs: Sequence[ProfiledJob],
    todo: Sequence[Measurement],
    inbox: str,
    settings: MeterSettings,
    tag: str,
) -> list[tuple[dict[str, Any], list[Measurement]]]:
    """One lyra job per (GPU type, runtime env, worker count), pinned to its type."""
    by_key = {j.key: j for j in jobs}
    groups: dict[tuple[str, str, int], list[Measurement]] = {}
    for m in todo:
        env = repr(sorted(by_key[m.jobs[0]].runtime_env.items()))
        groups.setdefault((m.gpu, env, m.workers), []).append(m)
    out = []
    for i, ((gpu, _env, n), ms) in enumerate(groups.items()):
        members = {k for m in ms for k in m.jobs}
        entry: dict[str, Any] = {
            "name": f"profile-{gpu}-{n}w-{i}-{tag}",
            "total_steps": len(ms),
            "workers": n,
            "throughput": {gpu: 1.0},
            "entrypoint": "lyra_ray.profiling.entry:profile_loop",
            "config": {
                "checkpoint_every": 1,
                "lyra_profiling_job": {
                    "inbox": inbox,
                    "settings": settings.to_dict(),
                    "measurements": [
                        {"id": m.id, "jobs": list(m.jobs), "workers": m.workers} for m in ms
                    ],
                    "sides": {k: dict(by_key[k].side) for k in members},
                    "loops": {
                        k: {"entrypoint": by_key[k].entrypoint, "config": dict(by_key[k].config)}
                        for k in members
                    },
                },
            },
        }
        runtime_env = by_key[ms[0].jobs[0]].runtime_env
        if runtime_env:
            entry["runtime_env"] = dict(runtime_env)
        out.append((entry, ms))
    return out


def _describe(m: Measurement, res: Sequence[Mapping[str, Any]]) -> str:
    what = f"{m.gpu} {' + '.join(m.jobs)}" + (f" x{m.workers}" if m.workers > 1 else "")
    what += " alone" if len(m.jobs) == 1 else " paired"
    errs = [str(r["error"]) for r in res if "error" in r]
    if errs:
        return f"{what}: failed: {errs[0]}"
    rates = " / ".join(f"{float(r.get('rate') or 0):.2f}" for r in res)
    loose = "" if all(r.get("converged") for r in res) else " (windows did not agree)"
    return f"{what}: {rates} steps/s{loose}"


def _run(args: argparse.Namespace) -> int:
    _positive("--max-minutes", args.max_minutes, most=7 * 24 * 60)
    _positive("--pairs", args.pairs, whole=True, most=1000)
    for name in ("warmup_s", "window_s"):
        _positive(f"--{name.replace('_', '-')}", getattr(args, name), most=3600)
    _positive("--max-windows", args.max_windows, whole=True, most=1000)
    jobs = profiled_jobs(args)
    out = Path(args.json)
    if out.is_dir() or not out.parent.is_dir():
        raise InputError(f"--json: {str(out)!r} is a directory or in no directory")
    settings = MeterSettings(args.warmup_s, args.window_s, 0.05, args.max_windows)
    from lyra_ray.cli.live import _client

    c = _client(args.address)
    me = c.whoami()
    if me.get("identities") and not me.get("admin"):
        print("lyra: error: profiling holds GPUs of every type: admins only", file=sys.stderr)
        return 1
    gpus = _cluster_gpus(c, args.gpu_types)
    jobs = [
        ProfiledJob(
            j.key,
            j.side,
            worker_counts(min(j.workers), max(j.workers), max(gpus.values()))
            if j.entrypoint != "lyra_ray.jobs.catalogue_loop:train_loop"
            else j.workers,
            j.runtime_env,
            j.entrypoint,
            j.config,
        )
        for j in jobs
    ]
    todo = plan(jobs, gpus, args.pairs)
    results, status = _measure(c, args, jobs, todo, settings, gpus)
    provenance = {
        "source": "lyra profile",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "gpu_types": gpus,
        "jobs": {j.key: dict(j.side) for j in jobs},
        "settings": settings.to_dict(),
        "pairs_per_job": args.pairs,
        "status": status,
    }
    result = table(todo, results, provenance)
    predicted = 0
    if args.pairs is not None:
        from lyra_ray.model.interference import predict_table

        result = predict_table(result)
        predicted = len(result.get("predicted", []))
    import json

    out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    missing = result["provenance"]["missing"]
    done = len(todo) - len(missing)
    for m in missing:
        print(f"missing: {m['id']}: {m['why']}")
    tail = f"; {predicted} pair entries predicted" if predicted else ""
    print(
        f"wrote {out}: {done} of {len(todo)} measurements{tail}"
        + (f"; {len(missing)} missing ({status})" if missing else "")
    )
    return 1 if missing else 0


def _measure(
    c: Any,
    args: argparse.Namespace,
    jobs: Sequence[ProfiledJob],
    todo: Sequence[Measurement],
    settings: MeterSettings,
    gpus: Mapping[str, int],
) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """Submit the profiling jobs, show each result as it lands, stop at the cap."""
    import ray

    from lyra_ray.contract.names import NAMESPACE
    from lyra_ray.profiling.entry import ProfileInbox
    from lyra_ray.sdk import SpecError

    tag = uuid.uuid4().hex[:6]
    name = f"lyra-profile-{tag}"
    inbox = ProfileInbox.options(name=name, namespace=NAMESPACE).remote()  # type: ignore[attr-defined]
    by_id = {m.id: m for m in todo}
    print(
        f"profiling {len(jobs)} job(s) on {', '.join(f'{g} ({n} GPUs)' for g, n in gpus.items())}: "
        f"{len(todo)} measurements"
    )
    ids: list[str] = []
    results: dict[str, list[dict[str, Any]]] = {}
    for entry, ms in profiling_entries(jobs, todo, name, settings, tag):
        try:
            ids.append(c.submit_entries([entry], base=Path(args.jobs).parent if args.jobs else "."))
        except SpecError as e:
            print(f"refused: {entry['name']}: {e}")
            for m in ms:
                results[m.id] = [{"error": f"refused: {e}"}]
    flat = [j for group in ids for j in group]
    deadline = time.monotonic() + args.max_minutes * 60
    status, shown, last = "complete", set(results), time.monotonic()
    try:
        while True:
            got = ray.get(inbox.get.remote(), timeout=60)
            for mid, res in got.items():
                if mid not in shown and mid in by_id:
                    shown.add(mid)
                    results[mid] = res
                    print(f"[{len(shown)}/{len(todo)}] {_describe(by_id[mid], res)}", flush=True)
                    last = time.monotonic()
            states = {j: c.status(j)["status"] for j in flat}
            if all(s in ("finished", "failed", "cancelled") for s in states.values()):
                failed = [f"{j} {s}" for j, s in states.items() if s != "finished"]
                if failed:
                    status = f"profiling job(s) ended: {', '.join(failed)}"
                break
            if time.monotonic() > deadline:
                status = f"cut short by --max-minutes {args.max_minutes:g}"
                break
            if time.monotonic() - last > 30:
                waiting = sum(1 for s in states.values() if s not in ("running",))
                print(
                    f"... {len(shown)}/{len(todo)} measured; {waiting} profiling job(s) waiting "
                    "for GPUs",
                    flush=True,
                )
                last = time.monotonic()
            time.sleep(1.0)
    except KeyboardInterrupt:
        status = "interrupted"
    finally:
        for j in flat:
            try:
                if c.status(j)["status"] not in ("finished", "failed", "cancelled"):
                    c.cancel(j)
            except Exception:  # a job that ended meanwhile: nothing to cancel
                pass
        results.update({k: v for k, v in ray.get(inbox.get.remote()).items() if k in by_id})
        ray.kill(inbox)
    return results, status
