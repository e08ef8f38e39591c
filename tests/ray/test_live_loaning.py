"""Live capacity loaning: Ray Serve and Ray Train share the inference pool (Lyra).

One training server and two inference servers of the same GPU type, the ``lyra``
policy, a platform team's own Serve application (a FastAPI ingress in front of a GPU
model, in a private folder shipped through its runtime_env, no lyra import:
``tests/ray/user_app.py``) and real elastic Ray Train jobs. Under low load one inference
server is lent and a job grows onto it; under a spike that server is reclaimed, the job
shrinks (it is not killed) and finishes with exactly its steps, the app's copy on the
server is back, and not one HTTP request, stream or handle call fails along the way.
The bad inputs only the scheduler can see (an import that fails, an attribute that is no
application, an app with no GPU, a runtime env it cannot use) are refused here too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ray.app_traffic import AppTraffic
from tests.ray.conftest import LiveCluster, start_pool_cluster, stop_cluster
from tests.ray.http_load import HttpLoad
from tests.ray.live_helpers import (
    assert_every_step_once,
    assert_placements_match,
    job,
    release,
    start_lending_scheduler,
    wait_until,
)
from tests.ray.user_app import calls, write_app

# alone: its checks bound serving traffic's failures and latency, which a second live
# module beside it (make test's other process) broke; it runs after, serially.
pytestmark = [pytest.mark.ray, pytest.mark.timeout(900), pytest.mark.alone]

GPU = "t4"
ROOT = Path(__file__).resolve().parents[2]
BAD_APPS = """
from ray import serve

NOT_AN_APP = 3


@serve.deployment
class Cpu:
    def __call__(self, request):
        return "no GPU here"


cpu_only = Cpu.bind()
"""


@pytest.fixture(scope="module")
def pool_cluster() -> Iterator[LiveCluster]:
    pytest.importorskip("ray")
    live = start_pool_cluster(GPU)
    try:
        yield live
    finally:
        stop_cluster(live)


@pytest.fixture(scope="module")
def client(pool_cluster: LiveCluster) -> Any:
    from lyra_ray.sdk import Client

    start_lending_scheduler(pool_cluster.workdir)
    return Client(pool_cluster.address)


@pytest.fixture(scope="module")
def app_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The team's private folder: their app, and modules that are not apps."""
    folder = write_app(tmp_path_factory.mktemp("team") / "shop")
    (folder / "bad_apps.py").write_text(BAD_APPS)
    (folder / "bad_boom.py").write_text("raise RuntimeError('no weights in this folder')\n")
    return folder


def shop(app_dir: Path, name: str = "shop", delay_ms: float = 300, **extra: Any) -> dict[str, Any]:
    """The team's service: their app, its folder as its runtime env; a POST takes
    ``delay_ms`` of model time."""
    return {
        "name": name,
        "import_path": "shop:build",
        "args": {"calls_dir": str(app_dir.parent / "calls"), "delay_ms": delay_ms},
        "runtime_env": {"working_dir": str(app_dir)},
        **extra,
    }


def _servers(client: Any) -> dict[str, str]:
    view = client.overview()
    return {n["id"]: n["state"] for n in view["nodes"] if n["pool"] == "inference"}


def _service(client: Any, name: str) -> dict[str, Any]:
    (svc,) = [s for s in client.overview()["serving"]["services"] if s["name"] == name]
    return dict(svc)


def test_bad_service_input_is_refused_and_changes_nothing(client: Any, app_dir: Path) -> None:
    """Each refusal is one line naming the field, and nothing is deployed; the import
    ones are the scheduler's, which builds the app in a Ray task with its runtime env."""
    import ray

    from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR
    from lyra_ray.sdk import LyraError, SpecError

    before = client.overview()["serving"]
    env = {"working_dir": str(app_dir)}
    ok_args = {"calls_dir": str(app_dir.parent / "calls")}
    refused = [
        ({"import_path": "no_such_module:app"}, "'import_path': cannot import 'no_such_m"),
        ({"import_path": "bad_boom:app"}, "'import_path'.*RuntimeError: no weights"),
        (
            {"import_path": "bad_apps:NOT_AN_APP"},
            "'import_path'.*not a Serve application \\(got int\\)",
        ),
        ({"import_path": "bad_apps:Cpu"}, "'import_path'.*bind it"),
        ({"import_path": "bad_apps:cpu_only"}, "'import_path'.*no GPU deployment.*Cpu"),
        ({"import_path": "bad_apps:cpu_only", "args": {"k": 1}}, "'args'"),
        ({"import_path": "shop:build"}, "'args'.*KeyError"),  # the builder needs calls_dir
        (
            {"import_path": "shop:build", "args": ok_args, "deployments": [{"name": "Nope"}]},
            r"'deployments\[0\]\.name'.*no deployment 'Nope'.*'Front', 'Model'",
        ),
        (
            {"import_path": "shop:build", "args": ok_args, "replicas_per_server": 3},
            "'replicas_per_server'",
        ),
        ({"import_path": "shop:build", "args": ok_args, "min_servers": 3}, "'min_servers'"),
        (
            {"import_path": "x:y", "target_ongoing_per_replica": float("nan")},
            "'target_ongoing_per_replica'",
        ),
    ]
    for extra, match in refused:
        with pytest.raises(SpecError, match=match):
            client.deploy_service({"name": "bad", "runtime_env": env, **extra})
    gone = {"working_dir": "gcs://_ray_pkg_0123456789abcdef.zip"}
    with pytest.raises(SpecError, match=r"'runtime_env'.*not in this cluster's GCS"):
        client.deploy_service({**shop(app_dir), "runtime_env": gone})
    actor = ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE)  # what a client could send
    local = ray.get(actor.deploy_service.remote({**shop(app_dir)}))
    assert not local["ok"] and "'runtime_env.working_dir'" in local["error"], local
    with pytest.raises(SpecError, match=r"'applications\[0\]'.*\['host'\]"):
        client.deploy_services({"applications": [{**shop(app_dir), "host": "0.0.0.0"}]})
    with pytest.raises(SpecError, match="no_such_module"):  # one bad app deploys none
        client.deploy_services(
            {
                "applications": [
                    shop(app_dir, "good"),
                    {**shop(app_dir, "bad"), "import_path": "no_such_module:x"},
                ]
            }
        )
    with pytest.raises(LyraError, match="'service'"):
        client.remove_service("nope")
    with pytest.raises(SpecError, match="'service'"):
        client.service_url("nope")
    after = client.overview()["serving"]
    assert after["services"] == before["services"] == []
    from ray import serve

    assert not [a for a in serve.status().applications if a.startswith("lyra-")]


HIGH = {"post": 2.0, "get": 0.5, "stream": 1.0}
LOW = {"post": 0.2, "get": 1.0, "stream": 0.125}
POST_MS, STREAM_N, STREAM_GAP_S, HELD_N = 1500, 12, 0.6, 30
"""A POST takes 1.5 s of model time, a stream 12 tokens 0.6 s apart (7.2 s); lyra's
target is 3 in flight per GPU replica, 6 per server (2 GPUs). High: ~10 in flight (3 in
POSTs, 7.2 in streams), both servers. Low: ~3-5, one server: open-loop streams (~0.9 in
flight) beside streams of ``HELD_N`` tokens (18 s, longer than the lend takes to begin)
held in flight on every server until a server's drain begins (``AppTraffic.hold``), so
that one runs on the server being drained. (With open-loop streams alone, none ran there
in about one run of four; with one held stream a server, routed both to one server, CI
failed once more.) Low's GETs (instant, one a second: ~5 in 10 s a server) keep every
serving server seen by the holder (``RECENT_S``).

WHY long requests at few a second (until 2026-12-01: POSTs of 300 ms at 10 a second,
GETs at 2, streams 0.3 s a token at 1.5; 13.5 requests and 18 tokens a second): the
need follows requests in flight, but Serve's one HTTP proxy pays per request and per
token. Under a one-core CPU hog the old high rate starved it: it missed its health checks
and was replaced twice, the ingress once, and 1,060 of 2,489 POSTs failed. The same ~10 in
flight now take 3.5 requests and 12 tokens a second. What the test still proves is
unchanged: the same demand in flight at each rate, so the same lend and reclaim, and every
POST, GET, stream and handle call answered whole, each POST run once."""


class HandleCaller:
    """A Python caller: ``embed`` on the service through lyra's handle, all along."""

    def __init__(self, client: Any, name: str) -> None:
        self.handle = client.service_handle(name)
        self.ok, self.failed, self.nodes = 0, [], set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> HandleCaller:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = self.handle.embed.remote([0.2] * 32).result(timeout_s=60)
                self.ok += 1
                self.nodes.add(out["node"])
            except Exception as e:
                self.failed.append(repr(e)[:200])
            time.sleep(0.3)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)


def _replica_actors(app_prefix: str) -> set[str]:
    """The alive actor IDs of the Serve replicas of applications named ``app_prefix*``."""
    from ray.util.state import list_actors

    alive = list_actors(
        filters=[("state", "=", "ALIVE")], limit=10_000, raise_on_missing_output=False
    )
    return {a.actor_id for a in alive if str(a.class_name).startswith(f"ServeReplica:{app_prefix}")}


def test_a_users_app_is_lent_and_reclaimed_under_traffic(
    client: Any, app_dir: Path, tmp_path: Path
) -> None:
    """The elastic job keeps its slow pace through the lend, the growth onto the lent
    server, the reclaim and the shrink, then runs its remaining steps without pause:
    every step once and the exact total are checked as before, without waiting out the
    slow steps sized for a slow host (issue 47)."""
    from lyra_ray.sdk import SpecError
    from lyra_ray.serving.apps import backend_app_name

    url = client.deploy_service(
        shop(
            app_dir,
            delay_ms=POST_MS,
            target_ongoing_per_replica=3.0,
            smoothing_s=2.0,
            down_after_s=6.0,
        )
    )
    assert url.endswith("/shop")
    with pytest.raises(SpecError, match=r"'route'.*taken by service 'shop'"):
        client.deploy_service(shop(app_dir, "shop2", route="/shop/v2"))
    # No service had a server until now, so both were lent; the service's floor takes one
    # back at once, and its copy there takes traffic.
    wait_until(lambda: _service(client, "shop")["ready"] >= 2, 180, "a copy ready")
    traffic = AppTraffic(url, stream_n=STREAM_N, stream_gap_s=STREAM_GAP_S).start(HIGH)
    caller = HandleCaller(client, "shop").start()
    try:
        wait_until(lambda: _service(client, "shop")["ready"] == 4, 180, "both servers serving")
        log, pace = tmp_path / "elastic.log", tmp_path / "pace"
        total = 600
        # WHY 0.25 s a step (0.1 until 2026-12-01): under a one-core hog the lend came
        # 3 min after the launch and the job was never grown onto the lent server: the
        # control actor held no run at the failure, so its 600 steps had most likely run
        # out (or so nearly that no resize paid). Its steps hold it until release(pace).
        jid = client.submit(
            job(
                "elastic",
                total,
                log,
                pace,
                min_workers=2,
                max_workers=4,
                throughput={GPU: 1.0},
                config={"step_sleep_s": 0.25, "checkpoint_every": 20},
            )
        )

        def sizes() -> list[int]:
            return [a["workers"] for _t, j, _g, a in client.call("launches") if j == jid]

        wait_until(lambda: sizes()[-1:] == [2] and _steps(log) > 0, 240, "the job on training")
        copies = {n: _replica_actors(backend_app_name("shop", n)) for n in _servers(client)}
        assert all(len(ids) == 3 for ids in copies.values()), copies  # Front, 2 x Model
        traffic.set_rates(LOW)
        traffic.hold(HELD_N)
        # Held streams only until a drain begins: those on the server then straddle it;
        # more would all land on the server left and, under a CPU hog, pushed its need
        # past one server, so it took the server back 14 s after lending it.
        wait_until(
            lambda: {"draining", "lent"} & set(_servers(client).values()), 180, "a drain begun"
        )
        traffic.hold(0)
        wait_until(lambda: "lent" in _servers(client).values(), 180, "a server lent")
        (lent,) = [n for n, st in _servers(client).items() if st == "lent"]
        (kept,) = set(copies) - {lent}
        wait_until(lambda: sizes()[-1] == 4, 240, "the elastic job grown onto the lent server")
        grown = [a for _t, j, _g, a in client.call("launches") if j == jid][-1]
        assert lent in {n for n, _ in grown["nodes"]}, (lent, grown)
        wait_until(lambda: _steps(log) >= 20 + _steps_before(client, jid, log), 240, "stepping")
        traffic.set_rates(HIGH)
        wait_until(lambda: sizes()[-1] == 2, 240, "the job shrunk off the reclaimed server")
        wait_until(lambda: _servers(client)[lent] == "serving", 240, "the server serving again")
        wait_until(lambda: _service(client, "shop")["ready"] == 4, 120, "its copy back, ready")
        release(pace)  # lend and reclaim seen: the rest of its steps without pause
        st = client.wait(jid, timeout=600)  # the spike lasts: the server stays with serving
    finally:
        report = traffic.stop()
        caller.stop()
    assert st["status"] == "finished" and st["steps_done"] == total, st
    assert st["num_preemptions"] == 0, st  # shrunk through checkpoint, never killed
    assert sizes()[:3] == [2, 4, 2], sizes()
    assert_every_step_once(log, total, slack=40)
    for kind in ("post", "get", "stream"):  # every request succeeded, every stream whole
        assert report[kind]["failures"] == {} and report[kind]["ok"] == report[kind]["sent"] > 0, (
            report
        )
    assert caller.failed == [] and caller.ok > 0, caller.failed
    assert _replica_actors(backend_app_name("shop", kept)) == copies[kept]  # never touched
    lend_at = max(e["at"] for e in client.overview()["serving"]["lends"] if e["node"] == lent)
    straddled = [
        r
        for r in traffic.records
        if r["kind"] == "stream" and r.get("node") == lent and r["t0"] < lend_at < r["t1"]
    ]
    assert straddled, "no stream was running on the server when its drain began"
    print(  # what ran, for the record (pytest -s)
        f"\nshop: {report['post']['sent']} POST, {report['get']['sent']} GET, "
        f"{report['stream']['sent']} streams ({len(straddled)} straddled the drain of "
        f"{lent[:12]}), {caller.ok} handle calls; kept {len(copies[kept])} replica actors"
    )
    seen = calls(app_dir.parent / "calls")
    posts = [r["id"] for r in traffic.records if r["kind"] == "post"]
    assert all(seen.get(f"POST {rid}") == 1 for rid in posts)  # each POST ran once
    reclaims = client.overview()["serving"]["reclaims"]
    assert any(r["node"] == lent for r in reclaims), reclaims
    # every copy (both servers' first, the reclaimed server's again) by the service's
    # one warm builder: none by a fresh task, no builder lost
    deployed = _service(client, "shop")["copies_deployed"]
    assert deployed["by_builder"] >= 3 and deployed["by_task"] == 0, deployed
    assert deployed["builders_lost"] == 0, deployed


def _one_of_each(url: str) -> None:
    """A JSON POST, a text GET and a whole stream, answered by the team's app at ``url``."""
    import json
    import urllib.request

    body = json.dumps({"id": "once", "x": [0.3] * 32}).encode()
    req = urllib.request.Request(
        f"{url}/predict", body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        assert r.status == 200 and len(json.loads(r.read())["y"]) == 32
    with urllib.request.urlopen(f"{url}/info", timeout=60) as r:
        assert r.headers["Content-Type"].startswith("text/plain")
        assert r.read().decode().startswith("model on ")
    with urllib.request.urlopen(f"{url}/stream?id=one&n=3&gap=0.05", timeout=60) as r:
        events = [ln[6:].strip() for ln in r.read().decode().splitlines() if ln.startswith("data")]
    assert events[1:] == ["0", "1", "2", "[DONE]"], events


def _dense_example() -> dict[str, Any]:
    import yaml

    raw = dict(yaml.safe_load((ROOT / "examples" / "dense" / "service.yaml").read_text()))
    raw["runtime_env"] = {"working_dir": str(ROOT / "examples" / "dense")}
    return raw


def _steps(log: Any) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def _steps_before(client: Any, jid: str, log: Any) -> int:
    """Steps logged by generations that ran with fewer than 4 workers."""
    small = {g for _t, j, g, a in client.call("launches") if j == jid and a["workers"] < 4}
    if not log.exists():
        return 0
    return sum(
        1 for ln in log.read_text().splitlines() if ln.strip() and int(ln.split()[0]) in small
    )


def _nodes_of(client: Any, jid: str) -> dict[str, int]:
    a = client.status(jid).get("assignment")
    return {n: g for n, g in a["nodes"]} if a else {}


def _deploy_from_serve_config(client: Any, app_dir: Path) -> None:
    """The team's app again, from a Serve config file with a ``lyra:`` block, through
    ``lyra serve deploy``: the target comes from the deployment's autoscaling_config,
    which lyra says in one line it runs itself."""
    import contextlib
    import io

    import yaml

    from lyra_ray.cli import main

    conf = app_dir.parent / "serve_config.yaml"  # beside the app's folder
    config = {
        "applications": [
            {
                "name": "shop2",
                "route_prefix": "/shop2",
                "import_path": "shop:build",
                "args": {"calls_dir": str(app_dir.parent / "calls"), "delay_ms": 50},
                "runtime_env": {"working_dir": "shop"},  # relative to the file
                "deployments": [
                    {
                        "name": "Model",
                        "autoscaling_config": {"target_ongoing_requests": 1.5, "max_replicas": 8},
                    }
                ],
                "lyra": {"min_servers": 1, "smoothing_s": 2.0},
            }
        ]
    }
    conf.write_text(yaml.safe_dump(config))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):  # this process is the cluster's driver already
        assert main(["serve", "deploy", str(conf)]) == 0
    said = out.getvalue()
    assert "autoscaling_config of ['Model'] is not run by Serve" in said, said
    assert "target 1.5 requests in flight per GPU replica" in said, said
    assert _service(client, "shop2")["url"].endswith("/shop2")


def test_live_reclaim_takes_the_server_the_knapsack_values_lowest(
    client: Any, pool_cluster: LiveCluster, app_dir: Path, tmp_path: Path
) -> None:
    """Two lent servers: one holds a whole rigid job, the other only flexible workers of
    an elastic job that also runs elsewhere. Serving needs one server back. Reclaiming
    the first would preempt the rigid job; reclaiming the second only shrinks the elastic
    one, so Lyra's knapsack takes the second — whatever their ids (naive reclaim goes by
    id)."""
    client.remove_service("shop")  # no service, no serving demand: both servers lent
    wait_until(lambda: set(_servers(client).values()) == {"lent"}, 180, "both servers lent")
    slow = {"step_sleep_s": 0.2, "checkpoint_every": 20}
    tput = {GPU: 1.0}
    big = 20_000  # longer than the test: the jobs are cancelled at the end
    training = client.submit(
        job("rigid-t", big, tmp_path / "t.log", workers=2, throughput=tput, config=slow)
    )
    inference = set(_servers(client))
    wait_until(
        lambda: (
            bool(_nodes_of(client, training)) and not set(_nodes_of(client, training)) & inference
        ),
        180,
        "a rigid job filling the training server",
    )
    rigid = client.submit(
        job("rigid-r", big, tmp_path / "r.log", workers=1, throughput=tput, config=slow)
    )
    elastic = client.submit(
        job(
            "elastic-e",
            big,
            tmp_path / "e.log",
            min_workers=1,
            max_workers=3,
            throughput=tput,
            config=slow,
        )
    )
    wait_until(
        lambda: sum(_nodes_of(client, elastic).values()) == 3 and bool(_nodes_of(client, rigid)),
        240,
        "the rigid job and the elastic job (3 workers) on the lent servers",
    )
    on_r, on_e = _nodes_of(client, rigid), _nodes_of(client, elastic)
    (server_r,) = on_r
    (other,) = inference - {server_r}
    assert on_e.get(other, 0) >= 1 and 3 - on_e.get(other, 0) >= 1, (on_r, on_e)
    why = (
        f"reclaiming {server_r[:12]} would preempt rigid-r (its only server); reclaiming "
        f"{other[:12]} takes {on_e[other]} of elastic-e's 3 workers, leaving it >= its minimum"
    )
    _deploy_from_serve_config(client, app_dir)
    wait_until(
        lambda: any(st != "lent" for st in _servers(client).values()), 180, "a server reclaimed"
    )
    states = _servers(client)
    assert states[other] in ("reclaiming", "serving") and states[server_r] == "lent", (states, why)
    wait_until(
        lambda: sum(_nodes_of(client, elastic).values()) == 3 - on_e[other], 240, "a scale-in"
    )
    assert client.status(rigid)["num_preemptions"] == 0, why
    assert client.status(elastic)["num_preemptions"] == 0, why
    try:
        wait_until(lambda: _servers(client)[other] == "serving", 240, "the server serving")
        _one_of_each(_service(client, "shop2")["url"])  # the config-file app answers
    finally:  # a failure here must not leave jobs running into the next test
        for jid in (training, rigid, elastic):
            client.cancel(jid)
    client.remove_service("shop2")


def test_flexible_workers_grow_onto_a_lent_server_of_another_type_and_shrink_back(
    client: Any, pool_cluster: LiveCluster, tmp_path: Path
) -> None:
    """Lyra's mixed-type jobs live (#21): an elastic job's base runs on a V100 training
    server; its flexible workers grow onto a lent T4 inference server (one Train run on
    two GPU types, each worker pinned by its node's label) and leave it when serving
    takes the server back: a shrink, not a preemption, and no step lost. Once the
    example service answers, the job runs its remaining steps without pause."""
    for svc in client.overview()["serving"]["services"]:
        client.remove_service(svc["name"])
    v100 = pool_cluster.add_gpu_node("v100", 2, pool="training")
    wait_until(lambda: set(_servers(client).values()) == {"lent"}, 180, "both servers lent")
    inference = set(_servers(client))
    slow = {"step_sleep_s": 0.2, "checkpoint_every": 20}
    filler = client.submit(  # keeps the T4 training server busy: only lent T4s are left
        job("t4-filler", 20_000, tmp_path / "f.log", workers=2, throughput={GPU: 1.0}, config=slow)
    )
    wait_until(
        lambda: bool(_nodes_of(client, filler)) and not set(_nodes_of(client, filler)) & inference,
        180,
        "the filler on the T4 training server",
    )
    log, pace = tmp_path / "mixed.log", tmp_path / "pace"
    total = 600
    jid = client.submit(
        job(
            "mixed",
            total,
            log,
            pace,
            min_workers=2,
            max_workers=4,
            throughput={"v100": 1.0, GPU: 0.5},
            config={"step_sleep_s": 0.1, "checkpoint_every": 20},
        )
    )

    def spread() -> tuple[int, int]:
        """(workers on the V100 server, workers on lent servers) now."""
        nodes = _nodes_of(client, jid)
        return nodes.get(v100, 0), sum(g for n, g in nodes.items() if n in inference)

    try:
        wait_until(lambda: spread() == (2, 2), 300, "base on the V100s, flexible workers lent")
        a = client.status(jid)["assignment"]
        assert a["gpu_type"] == "v100" and a["workers"] == 4 and a.get("extra"), a
        wait_until(lambda: _steps(log) >= 20 + _steps_before(client, jid, log), 240, "stepping")
        assert_placements_match(client, jid)  # each worker reported the node it was pinned to
        # The shipped example (examples/dense): a plain Serve app, its folder its runtime env.
        url = client.deploy_service({**_dense_example(), "name": "back", "min_servers": 2})
        wait_until(lambda: spread() == (2, 0), 240, "the flexible workers gone with the servers")
        assert not client.status(jid)["assignment"].get("extra")
        wait_until(lambda: _service(client, "back")["ready"] == 4, 120, "the example on both")
        load = HttpLoad(url).start(rate=4.0)  # the real model answers every request
        try:
            wait_until(lambda: load.ok >= 10, 60, "the example answering")
        finally:
            report = load.stop()
        assert report["failures"] == {} and report["ok"] == report["sent"] > 0, report
        release(pace)  # grown and shrunk back: the rest of its steps without pause
        st = client.wait(jid, timeout=600)
    finally:  # a failure here must not leave jobs or the service into the next test
        client.cancel(filler)
        if client.status(jid)["status"] not in ("finished", "failed", "cancelled"):
            client.cancel(jid)
        if any(s["name"] == "back" for s in client.overview()["serving"]["services"]):
            client.remove_service("back")
    assert st["status"] == "finished" and st["steps_done"] == total, st
    assert st["num_preemptions"] == 0, st  # shrunk through a checkpoint, never killed
    assert_every_step_once(log, total, slack=20)


MOE_LOW_RPS, MOE_SPIKE_RPS = 0.2, 10.0
"""A MoE request takes ~50 ms here on a quiet host (a dozen expert calls per layer), more
on a loaded one. With 0.1 requests in flight per GPU as the target (0.2 per server): the
spike keeps >= 0.5 in flight (both servers, with margin); the low rate needs one server
as long as a request takes under a second."""


def _plan(client: Any) -> dict[str, Any]:
    return dict(_service(client, "moe").get("plan") or {})


def test_moe_service_replans_its_experts_on_lend_and_reclaim(client: Any) -> None:
    """The MoE service (a transformers Mixtral) on the lyra cluster: its expert replicas
    follow the servers lyra lends and reclaims. The replica budget per layer is the serving
    GPUs times their slots; a lend lowers it and the planner re-plans onto the server
    left, a reclaim plans back, popular experts always get the most replicas, and no
    request fails."""
    wait_until(lambda: set(_servers(client).values()) == {"lent"}, 180, "both servers lent")
    slots = 3
    url = client.deploy_service(
        {
            "name": "moe",
            "model": "moe",
            "target_ongoing_per_replica": 0.1,
            "smoothing_s": 2.0,
            "down_after_s": 6.0,
            # GPU-like timing, set explicitly: each call takes the H200 time of a
            # Mixtral-sized expert; 1,024 routed tokens a request-layer, past its knee, so
            # the plan for this batch regime gives popular experts more replicas
            "config": {
                "slots": slots,
                "emulate": 1,
                "cost_dim": 4096,
                "cost_hidden": 14336,
                "batch": 8,
                "seq": 128,
                "replan_s": 0,
            },
        }
    )
    wait_until(lambda: _plan(client).get("devices") == 2, 180, "the MoE service on one server")
    load = HttpLoad(url).start(rate=MOE_SPIKE_RPS)
    try:
        wait_until(lambda: _plan(client).get("devices") == 4, 240, "a server reclaimed for MoE")
        load.set_rate(MOE_LOW_RPS)
        wait_until(lambda: _plan(client).get("devices") == 2, 240, "a server lent again")
        wait_until(lambda: "lent" in _servers(client).values(), 120, "the server lent")
        load.set_rate(MOE_SPIKE_RPS)
        wait_until(lambda: _plan(client).get("devices") == 4, 240, "the server reclaimed")
    finally:
        report = load.stop()
    assert report["failures"] == {}, report
    assert report["ok"] == report["sent"] > 0, report
    replans = _plan(client)["replans"]
    budgets = [r["budget_per_layer"] for r in replans]
    # one server (2 GPUs) -> both -> one (the lend) -> both (the reclaim)
    assert budgets[:4] == [2 * slots, 4 * slots, 2 * slots, 4 * slots], replans
    for r in replans:
        for counts, share in zip(r["counts"], r["planned_share"], strict=True):
            assert sum(counts) == r["replicas_per_layer"] <= r["budget_per_layer"], r
            assert min(counts) >= 1, r
            # Lina: the expert the plan expects most tokens at gets the most replicas
            assert counts[share.index(max(share))] == max(counts), r
    assert any(len(set(c)) > 1 for r in replans for c in r["counts"]), replans
    client.remove_service("moe")
