"""Ray's real autoscaler, driven by lyra's queue, on Ray's fake multi-node provider.

cluster.yaml is played on this host (lyra_ray/ops/host_cluster.py): the fake provider's
config derived from its node types, its head started with its own head commands (``ray
start --head --autoscaling-config=...`` then ``lyra up --config ...``). Only the a100
type is kept, one fake GPU per node (each Train worker is a process here) and an idle
timeout of 6 s; its ``max_workers`` (2), labels and pool are the file's.

One scenario, one cluster: three one-GPU a100 jobs are submitted with ``lyra submit``
to a cluster with no a100 node. lyra asks for three nodes, bound to two by max_workers;
the autoscaler starts two; two jobs run on them, the third waits. One of the two nodes
is taken away (its raylet SIGKILLed) after its job checkpointed: the job resumes from
its checkpoint (then every job runs the rest of its steps without pause: ``release``).
Every job ends with exactly its steps, every worker ran on a node the
autoscaler started, the request is in ``lyra status --json`` and in the scheduler's
metrics, and once the queue is empty lyra stops asking and the nodes go.

The jobs are queued where nothing can run them, so the nodes join late: they must be
heard of (the desk's GPU count once took the first one's NodeUp:
tests/unit/test_inventory_view.py) and used at once, not a round later
(tests/unit/test_late_nodes.py).
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chaos.helpers import check_steps, lyra_cli, step_lines
from tests.ray.live_helpers import job, release
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(900),
]

ROOT = Path(__file__).resolve().parents[2]
STEPS, CKPT = 60, 10
MAX = 2  # cluster.yaml's a100 max_workers


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    pytest.importorskip("ray")
    from lyra_ray.ops.autoscaling_config import HostFit
    from lyra_ray.ops.host_cluster import start_host_cluster

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # the autoscaler replaces a node that stopped heartbeating after this long (30 s)
    os.environ.setdefault("AUTOSCALER_HEARTBEAT_TIMEOUT_S", "10")
    fit = HostFit(
        max_gpus_per_node=1,
        node_types=("a100",),
        idle_timeout_minutes=0.1,
        lyra={"period_s": 0.5, "grace_s": 20.0},
    )
    doc = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    assert doc["available_node_types"]["a100"]["max_workers"] == MAX
    hc = start_host_cluster(
        ROOT / "cluster.yaml",
        tmp_path_factory.mktemp("autoscale"),
        fit,
        autoscaler=True,
        auth_mode=os.environ["RAY_AUTH_MODE"],
    )
    try:
        yield hc
    finally:
        from lyra_ray.ops.embedded import disconnect

        disconnect()
        hc.down()


def _lyra(hc: Any, *args: str) -> str:
    env = {
        **os.environ,
        "RAY_ADDRESS": hc.address,
        "LYRA_HOME": hc.heads[0].home,
        "PYTHONPATH": str(ROOT),
    }
    return lyra_cli(*args, env=env, timeout=300)


def _metrics(address: str) -> str:
    import ray

    head = next(n for n in ray.nodes() if n["Alive"] and "node:__internal_head__" in n["Resources"])
    with urllib.request.urlopen(f"http://127.0.0.1:{head['MetricsExportPort']}/metrics") as r:
        return str(r.read().decode())


def _autoscaler_log(hc: Any) -> str:
    """The tail of the head's autoscaler log (its temp dir goes with the cluster)."""
    logs = sorted(Path(hc.heads[-1].tmp).glob("**/logs/monitor.log"))
    return logs[-1].read_text()[-6000:] if logs else "no monitor.log"


def test_queued_jobs_scale_the_pool_up_within_its_bound_and_down_after(
    host: Any, tmp_path: Path
) -> None:
    import ray

    from lyra_ray.sdk import Client

    hc = host
    token = hc.token_file()
    client = Client(hc.address, token=None if token is None else token.read_text().strip())
    before = {n["NodeID"] for n in ray.nodes()}
    assert len(before) == 1  # the head alone: no a100 node yet
    logs = {n: tmp_path / f"{n}.log" for n in ("a0", "a1", "a2")}
    cfg = {"step_sleep_s": 0.3, "checkpoint_every": CKPT}
    pace = tmp_path / "pace"  # released once the lost node's job resumed elsewhere
    jobs = [job(n, STEPS, p, pace, throughput={"a100": 2.0}, config=cfg) for n, p in logs.items()]
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump({"jobs": jobs}))
    t0 = time.monotonic()
    out = _lyra(hc, "submit", str(tmp_path / "jobs.yaml"))
    ids = re.findall(r"^(a\d-\S+)$", out, re.M)
    assert len(ids) == 3, out

    # lyra asks for three nodes, bound to max_workers; the autoscaler starts two
    seen: list[dict[str, Any]] = []

    def both_up() -> bool:
        a = client.overview()["autoscale"]["node_types"][0]
        seen.append(a)
        return bool(a["have"] == MAX)

    try:
        wait_for(both_up, 180, "two a100 nodes started by the autoscaler")
    except AssertionError:
        raise AssertionError(f"not scaled up: {seen[-2:]}\n{_autoscaler_log(hc)}") from None
    bound = [a for a in seen if a["requested"] == MAX and a["wanted"] > MAX]
    assert bound and "max_workers" in bound[0]["bound"], seen[-3:]
    scaled_up_s = time.monotonic() - t0

    # a node is taken away after its job checkpointed: the job resumes from the checkpoint
    def running_past_checkpoint() -> Any:
        for jid, log in zip(ids, logs.values(), strict=True):
            if client.status(jid)["status"] == "running" and len(step_lines(log)) > CKPT + 2:
                return jid, log
        return None

    victim, vlog = wait_for(running_past_checkpoint, 240, "a job past its first checkpoint")
    node = next(a for _t, j, _g, a in reversed(client.call("launches")) if j == victim)["nodes"][0][
        0
    ]
    gen, last = step_lines(vlog)[-1]
    hc.kill_node(node)
    wait_for(
        lambda: any(g > gen for g, _ in step_lines(vlog)), 300, "the victim stepping elsewhere"
    )
    release(pace)  # the rest of every job's steps prove nothing more: no pause

    rows = {j: client.wait(j, timeout=600) for j in ids}
    finished_s = time.monotonic() - t0
    for j, log in zip(ids, logs.values(), strict=True):
        assert rows[j]["status"] == "finished" and rows[j]["steps_done"] == STEPS, rows[j]
        check_steps(log, STEPS, slack=CKPT + 1 if j == victim else 0)
    resumed = next(s for g, s in step_lines(vlog) if g > gen)  # the first step after the loss
    assert resumed % CKPT == 0 and last + 1 - CKPT <= resumed <= last + 1, (last, resumed)

    # every worker ran on an a100 node the autoscaler started (none was up before)
    placements = [p for p in client.call("history") if p["job_id"] in ids]
    assert {p["job_id"] for p in placements} == set(ids)
    for p in placements:
        assert p["node_id"] not in before and p["labels"]["gpu-type"] == "a100", p
    autoscaled = {p["node_id"] for p in placements}

    # the requests are in `lyra status --json` and in the scheduler's metrics
    status = json.loads(_lyra(hc, "status", "--json"))["autoscale"]
    assert status["enabled"] and status["requests_made"] >= 2, status
    assert any(r["level"].get("a100") == MAX for r in status["last_requests"]), status

    def exported() -> str | None:
        text = _metrics(hc.address)
        return text if "ray_lyra_autoscale_requests_total" in text else None

    text = wait_for(exported, 60, "the autoscale metrics exported")
    assert re.search(r'ray_lyra_autoscale_requested_nodes\{[^}]*node_type="a100"', text), text[:500]

    # the queue is empty: lyra asks for none, and the autoscaler lets the nodes go
    last: list[Any] = []

    def released() -> bool:
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        a = client.overview()["autoscale"]["node_types"][0]
        last[:] = [sorted(alive - before), a]
        return not (alive - before) and a["requested"] == 0

    try:
        wait_for(released, 180, "the idle a100 nodes released")
    except AssertionError:
        from ray.util import placement_group_table
        from ray.util.state import list_actors

        pgs = [
            (k[:8], v["state"], v["bundles"], v.get("bundles_to_node_id"))
            for k, v in placement_group_table().items()
            if v["state"] != "REMOVED"
        ]
        actors = [
            (a.class_name, a.node_id[:8] if a.node_id else None, a.state)
            for a in list_actors(address=hc.address, filters=[("state", "=", "ALIVE")])
        ]
        avail = {n["NodeID"][-6:]: n["Resources"] for n in ray.nodes() if n["Alive"]}
        raise AssertionError(
            f"nodes not released: {last}\nplacement groups: {pgs}\nactors: {actors}\n"
            f"available: {ray.available_resources()}\ntotals: {avail}"
        ) from None
    assert max(a["have"] for a in seen) <= MAX
    print(
        f"scaled up in {scaled_up_s:.1f} s, jobs done in {finished_s:.1f} s, "
        f"down after {time.monotonic() - t0:.1f} s; nodes used {len(autoscaled)}"
    )
