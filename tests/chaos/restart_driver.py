"""The client side of ``test_chaos_restart.py``, run in its own process so that its Ray
auth mode and connection match the ``lyra up`` cluster it talks to.

``python -m tests.chaos.restart_driver before ADDRESS SPEC_JSON`` submits the jobs of
SPEC_JSON (a list), waits for the first to finish and for the log of the second to reach
``min_steps``, and prints the job ids; ``after ADDRESS IDS_JSON`` waits for every job
and prints their statuses and the scheduler's restart count.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lyra_ray.sdk import Client


def _steps(log: str) -> int:
    p = Path(log)
    return len(p.read_text().splitlines()) if p.exists() else 0


def main(phase: str, address: str, arg: str) -> None:
    client = Client(address, retry_s=120.0)
    if phase == "before":
        spec = json.loads(arg)
        ids = [client.submit(j) for j in spec["jobs"]]
        assert client.wait(ids[0], timeout=400)["status"] == "finished"
        deadline = time.monotonic() + 400
        while _steps(spec["jobs"][1]["config"]["step_log"]) < spec["min_steps"]:
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.5)
        print(json.dumps(ids))
    else:
        ids = json.loads(arg)
        out = {jid: client.wait(jid, timeout=600) for jid in ids}
        print(json.dumps({"status": out, "restarts": client.call("ping")["restarts"]}))


if __name__ == "__main__":
    main(*sys.argv[1:4])
