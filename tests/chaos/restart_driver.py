"""The client side of ``test_chaos_restart.py``, run in its own process so that its Ray
auth mode and connection match the ``lyra up`` cluster it talks to.

``python -m tests.chaos.restart_driver before ADDRESS SPEC_JSON`` submits the jobs of
SPEC_JSON (a list: one that finishes, one long, one that must queue), waits for the first
to finish and for the log of the second to reach ``min_steps``, and prints the job ids,
their statuses and the cluster's GPU node ids; ``after ADDRESS ARG_JSON`` waits until the
scheduler lists only this cluster's nodes (none of ``old_nodes``), then for every job,
and prints their statuses, the nodes it saw and what the scheduler says it restored;
``apart ADDRESS {"folder": DIR}`` runs ``tests/ray/working_dir_probe.py`` between the
head and a GPU node and prints its reads.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from lyra_ray.sdk import Client


def _steps(log: str) -> int:
    p = Path(log)
    return len(p.read_text().splitlines()) if p.exists() else 0


def _nodes(client: Client) -> list[str]:
    return sorted(str(n["id"]) for n in client.call("overview")["nodes"])


def main(phase: str, address: str, arg: str) -> None:
    client = Client(address, retry_s=120.0)
    out: dict[str, Any]
    if phase == "before":
        spec = json.loads(arg)
        ids = [client.submit(j) for j in spec["jobs"]]
        assert client.wait(ids[0], timeout=400)["status"] == "finished"
        deadline = time.monotonic() + 400
        while _steps(spec["jobs"][1]["config"]["step_log"]) < spec["min_steps"]:
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.5)
        statuses = [client.status(j)["status"] for j in ids]
        out = {"ids": ids, "statuses": statuses, "nodes": _nodes(client)}
    elif phase == "apart":
        import ray

        from tests.ray.working_dir_probe import reads_across_nodes

        alive = [n for n in ray.nodes() if n["Alive"]]
        head = next(n["NodeID"] for n in alive if not n["Resources"].get("GPU"))
        server = next(n["NodeID"] for n in alive if n["Resources"].get("GPU"))
        out = {"reads": reads_across_nodes(Path(json.loads(arg)["folder"]), head, server)}
    else:
        got = json.loads(arg)
        old = set(got["old_nodes"])
        deadline = time.monotonic() + 120
        while old & set(nodes := _nodes(client)) or not nodes:
            assert time.monotonic() < deadline, f"old nodes still listed: {nodes}"
            time.sleep(0.2)
        ping = client.call("ping")
        status = {jid: client.wait(jid, timeout=600) for jid in got["ids"]}
        out = {
            "status": status,
            "nodes": nodes,
            "restarts": ping["restarts"],
            "restored": ping["restored"],
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:4])
