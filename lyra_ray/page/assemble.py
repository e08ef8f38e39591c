"""The page's data, assembled from what the scheduler's API returns: pure, no Ray.

Inputs are exactly what the SDK's client gets for the logged-in user (``overview`` and
``launches`` under their token), so the page shows a user no more than ``lyra status``
does; this module only reshapes them for drawing:

- every server's GPUs, one slot each, with what it is doing (training, serving,
  draining, reclaiming, lent, idle) and the job holding it where the user may see it;
- the queue with each job's wait reason, the running jobs with progress, size, resizes,
  preemptions and space-sharing partners, and links into the Ray dashboard;
- loans and reclaims over the last hours, as the scheduler recorded them (its serving
  pool persists both lists, so the chart survives a scheduler restart);
- services with replicas, requests/s and latency, MoE expert replicas per layer;
- teams, when the scheduler's overview has them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

WINDOW_S = 6 * 3600.0
"""How far back the loan chart reaches."""
ACTIVE = ("running",)
WAITING = ("submitted", "queued", "preempted")


def assemble(
    overview: Mapping[str, Any],
    launches: Sequence[Sequence[Any]],
    who: Mapping[str, Any],
    now: float,
    rates: Mapping[str, Mapping[str, Any]] | None = None,
    dashboard: str | None = None,
    window_s: float = WINDOW_S,
) -> dict[str, Any]:
    """Everything the page draws, as one JSON-able mapping."""
    jobs = list(overview.get("jobs", []))
    serving = overview.get("serving", {})
    out: dict[str, Any] = {
        "user": {"name": who.get("name"), "admin": bool(who.get("admin"))},
        "now": now,
        "rounds": _rounds(overview.get("rounds", {})),
        "servers": servers(overview.get("nodes", []), jobs, bool(who.get("admin"))),
        "queue": [_queued(j, now, dashboard) for j in jobs if j.get("status") in WAITING],
        "running": [_running(j, launches, dashboard) for j in jobs if j.get("status") in ACTIVE],
        "ended": [_ended(j, dashboard) for j in jobs if j.get("status") not in (*ACTIVE, *WAITING)],
        "loans": loan_events(serving, now, window_s),
        "services": [
            _service(s, (rates or {}).get(s["name"], {})) for s in serving.get("services", [])
        ],
        "demand_servers": serving.get("demand_servers"),
        "dashboard": dashboard,
    }
    if "teams" in overview:
        out["teams"] = overview["teams"]
    return out


def _rounds(r: Mapping[str, Any]) -> dict[str, Any]:
    nxt, now = r.get("next_round_s"), r.get("now")
    left = None if nxt is None or now is None else max(0.0, float(nxt) - float(now))
    return {
        "policy": r.get("policy"),
        "round_s": r.get("round_s"),
        "done": r.get("rounds_done"),
        "next_in_s": left,
    }


def _holders(jobs: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[str, str, int]]]:
    """Per node: (job id, job name, GPUs) of every running job the user may see."""
    out: dict[str, list[tuple[str, str, int]]] = {}
    for j in jobs:
        a = j.get("assignment")
        if j.get("status") not in ACTIVE or not a:
            continue
        for node, gpus in a.get("nodes", []):
            out.setdefault(str(node), []).append((str(j["id"]), str(j.get("name")), int(gpus)))
    return out


def servers(
    nodes: Sequence[Mapping[str, Any]], jobs: Sequence[Mapping[str, Any]], admin: bool
) -> list[dict[str, Any]]:
    """Each server with its state and one slot per GPU. A training server's state is
    ``training`` while a visible job holds a GPU there, else ``idle``; an inference
    server's is the serving pool's (serving, draining, lent, reclaiming), and so are its
    GPUs' (a lent server's name the job holding them). A training server's GPUs that no
    job the user may see holds are ``idle`` for an admin (who sees every job) and
    ``free or others'`` for anyone else."""
    held = _holders(jobs)
    rest = "idle" if admin else "free or others'"
    out = []
    for n in nodes:
        nid, gpus = str(n["id"]), int(n.get("gpus", 0))
        mine = held.get(nid, [])
        slots: list[dict[str, Any]] = []
        for jid, name, k in mine:
            slots += [{"state": "training", "job": jid, "job_name": name}] * k
        pool_state = str(n.get("state", ""))
        if n.get("pool") == "inference":
            if pool_state == "lent":  # lent to training: its free GPUs are lent too
                fill = "lent"
                for s in slots:
                    s["state"] = "lent"
            else:
                fill = pool_state
            state = pool_state
        else:
            fill = rest
            state = "training" if mine else ("idle" if admin else "training pool")
        slots = slots[:gpus] + [{"state": fill, "job": None, "job_name": None}] * max(
            0, gpus - len(slots)
        )
        out.append(
            {
                "id": nid,
                "short": nid[:8],
                "pool": n.get("pool"),
                "gpu_type": n.get("gpu_type"),
                "gpus": gpus,
                "state": state,
                "slots": slots,
            }
        )
    return out


def links(job: Mapping[str, Any], dashboard: str | None) -> dict[str, str]:
    """Where the Ray dashboard shows this job: the ``ray job submit`` that carried it
    (with its driver's logs), and the Ray Train runs (the dashboard's Train API lists
    the run by its name, ``lyra-<job id>``)."""
    if not dashboard:
        return {}
    d = dashboard.rstrip("/")
    out = {"train_run": f"{d}/api/train/v2/runs", "logs": f"{d}/#/logs"}
    if job.get("ray_job"):
        out["ray_job"] = f"{d}/#/jobs/{job['ray_job']}"
        out["logs"] = out["ray_job"]
    return out


def _common(j: Mapping[str, Any], dashboard: str | None) -> dict[str, Any]:
    return {
        "id": j.get("id"),
        "name": j.get("name"),
        "user": j.get("owner") or j.get("user"),
        "status": j.get("status"),
        "reason": j.get("reason"),
        "ray_job": j.get("ray_job"),
        "train_run": f"lyra-{j.get('id')}",
        "links": links(j, dashboard),
    }


def _queued(j: Mapping[str, Any], now: float, dashboard: str | None) -> dict[str, Any]:
    return {
        **_common(j, dashboard),
        "reason_code": j.get("reason_code"),
        "waited_s": j.get("queued_s"),
        "preemptions": j.get("num_preemptions", 0),
    }


def _running(
    j: Mapping[str, Any], launches: Sequence[Sequence[Any]], dashboard: str | None
) -> dict[str, Any]:
    a = j.get("assignment") or {}
    total = float(j.get("total_steps") or 0)
    done = float(j.get("steps_done") or 0)
    runs = [
        {
            "at": float(t),
            "generation": int(g),
            "workers": int(x.get("workers", 0)),
            "gpu_type": x.get("gpu_type"),
        }
        for t, jid, g, x in launches
        if jid == j.get("id")
    ]
    return {
        **_common(j, dashboard),
        "steps_done": done,
        "total_steps": total,
        "progress": min(1.0, done / total) if total > 0 else 0.0,
        "gpu_type": a.get("gpu_type"),
        "workers": a.get("workers"),
        "extra": a.get("extra"),
        "nodes": [[str(n)[:8], int(g)] for n, g in a.get("nodes", [])],
        "partner": a.get("partner"),
        "resizes": j.get("num_resizes", 0),
        "preemptions": j.get("num_preemptions", 0),
        "runs": runs,
    }


def _ended(j: Mapping[str, Any], dashboard: str | None) -> dict[str, Any]:
    return {
        **_common(j, dashboard),
        "steps_done": j.get("steps_done"),
        "total_steps": j.get("total_steps"),
        "resizes": j.get("num_resizes", 0),
        "preemptions": j.get("num_preemptions", 0),
    }


def loan_events(serving: Mapping[str, Any], now: float, window_s: float) -> dict[str, Any]:
    """The scheduler's recorded lends and reclaims within the window, oldest first."""
    events = [
        {"kind": "lend", "node": str(e["node"]), "at": float(e["at"])}
        for e in serving.get("lends", [])
    ] + [
        {
            "kind": "reclaim",
            "node": str(e["node"]),
            "at": float(e["at"]),
            "latency_s": e.get("latency_s"),
        }
        for e in serving.get("reclaims", [])
    ]
    kept = sorted((e for e in events if e["at"] >= now - window_s), key=lambda e: e["at"])
    return {"window_s": window_s, "start": now - window_s, "events": kept}


def _service(s: Mapping[str, Any], rate: Mapping[str, Any]) -> dict[str, Any]:
    out = {
        "name": s.get("name"),
        "model": s.get("model"),
        "url": s.get("url"),
        "replicas": s.get("replicas"),
        "ready": s.get("ready"),
        "demand_servers": s.get("demand_servers"),
        "rps": rate.get("rps"),
        "latency_ms": rate.get("latency_ms"),
        "in_flight": rate.get("in_flight"),
    }
    plan = s.get("plan")
    if isinstance(plan, Mapping) and plan.get("counts"):
        counts = [[int(c) for c in row] for row in plan["counts"]]
        share = plan.get("planned_share") or []
        # an expert's planned share of its layer's load, split evenly over its replicas
        per_replica = [
            float(sh) / c
            for srow, crow in zip(share, counts, strict=False)
            for sh, c in zip(srow, crow, strict=False)
            if c > 0
        ]
        out["moe"] = {
            "replicas_per_layer": [sum(row) for row in counts],
            "devices": plan.get("devices"),
            "busiest_share": max(per_replica) if per_replica else None,
        }
    return out
