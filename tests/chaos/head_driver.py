"""The client side of ``test_head_recovery.py``, in processes of its own: a Ray driver
connected to a head that is about to die would take the test's process down with it.

``python -m tests.chaos.head_driver before ADDRESS TOKEN SPEC_JSON`` deploys the
service, waits until it answers, submits the jobs, waits until the running ones have
passed their first checkpoint and the last is queued; prints ids, URL and node ids.

``python -m tests.chaos.head_driver after ADDRESS TOKEN STATE_JSON`` is started right
after the head's commands ran again; it records (wall clock) when the worker nodes are
back, when the scheduler answers (with its restart count and every job's status then),
when the service answers again and when each running job steps again after the
scheduler answered, then (with a pace file in the state) releases the jobs' pace and
waits for every job and prints it all as JSON.
"""

from __future__ import annotations

import http.client
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from lyra_ray.sdk import Client
from tests.ray.live_helpers import release
from tests.waiting import wait_for

MARK = "head_driver result: "


def _lines(log: str) -> list[tuple[int, int]]:
    p = Path(log)
    if not p.exists():
        return []
    return [(int(g), int(s)) for g, s in (ln.split() for ln in p.read_text().splitlines() if ln)]


def _answers(url: str) -> bool:
    req = urllib.request.Request(
        url, data=b"{}", headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return bool(r.status == 200)
    except (OSError, http.client.HTTPException):  # not up yet, or not Serve's proxy
        return False


_until = wait_for


def before(address: str, token: str | None, spec: dict[str, Any]) -> dict[str, Any]:
    import ray

    client = Client(address, token=token, retry_s=120.0)
    url = client.deploy_service(spec["service"])
    _until(lambda: _answers(url), 300, f"the service answering at {url}")
    ids = [client.submit(j) for j in spec["jobs"]]
    running, queued = ids[:-1], ids[-1]
    logs = [j["config"]["step_log"] for j in spec["jobs"][:-1]]
    _until(
        lambda: all(len(_lines(log)) > spec["past_steps"] for log in logs),
        400,
        "the running jobs past their first checkpoint",
    )
    assert client.status(queued)["status"] == "queued", client.status(queued)
    alive = [n for n in ray.nodes() if n["Alive"]]
    head = next(n["NodeID"] for n in alive if "node:__internal_head__" in n["Resources"])
    nodes = sorted(n["NodeID"] for n in alive)
    return {
        "ids": ids,
        "running": running,
        "queued": queued,
        "url": url,
        "nodes": nodes,
        "head": head,
        "logs": logs,
        "pace": spec.get("pace"),
    }


def after(address: str, token: str | None, state: dict[str, Any]) -> dict[str, Any]:
    import ray

    out: dict[str, Any] = {}
    # a client of the restarted cluster: its scheduler may still be coming back
    client = Client(address, token=token, retry_s=300.0)
    workers = set(state["nodes"]) - {state["head"]}
    _until(
        lambda: workers <= {n["NodeID"] for n in ray.nodes() if n["Alive"]},
        300,
        "the worker nodes alive again",
    )
    out["nodes_back_at"] = time.time()
    ping = _until(lambda: _try(client.call, "ping"), 300, "the scheduler answering")
    out["scheduler_back_at"] = time.time()
    base_logs = {
        j: len(_lines(log)) for j, log in zip(state["running"], state["logs"], strict=True)
    }
    out["restarts"] = ping.get("restarts")
    out["first_status"] = {j: client.status(j)["status"] for j in state["ids"]}
    _until(lambda: _answers(state["url"]), 300, f"the service answering again at {state['url']}")
    out["serve_back_at"] = time.time()
    logs = dict(zip(state["running"], state["logs"], strict=True))
    stepped: dict[str, float] = {}
    base = base_logs  # steps logged when the scheduler answered: progress after that

    def all_stepped() -> bool:
        for j, log in logs.items():
            if j not in stepped and len(_lines(log)) > base[j]:
                stepped[j] = time.time()
        return len(stepped) == len(logs)

    _until(all_stepped, 600, "every running job stepping again")
    out["stepped_at"] = stepped
    if state.get("pace"):  # the recovery is seen: the steps left prove nothing on timing
        release(Path(state["pace"]))
    out["final"] = {j: client.wait(j, timeout=900) for j in state["ids"]}
    out["finished_at"] = time.time()
    return out


def _try(fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except Exception:
        return None


def main(phase: str, address: str, token: str, arg: str) -> None:
    tok = None if token == "-" else token
    fn = before if phase == "before" else after
    # marked: Ray may print to stdout too, before or after it
    print(MARK + json.dumps(fn(address, tok, json.loads(arg))), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5])
