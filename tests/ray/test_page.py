"""The operator's page on a live cluster, opened in a real headless Chromium (issue #34).

One training server and two inference servers of one GPU type, the lending scheduler
(Lyra, no reserve), identities on (an admin and alice). With no service both inference
servers are lent; a service's floor reclaims one. Alice's job comes through a real
``ray job submit`` (so it carries its Ray submission id); the admin's wide job waits for
GPUs. The page is read as Chromium rendered it, after its JS ran: each job with its
state and reason, each server's state, and the loan chart's marks, which must be the
scheduler's recorded lends and reclaims, also after the scheduler restarted. Alice's
page shows only her job; no token shows a login form and nothing else. Sessions: the
login link's token leaves the address, logout ends the session, removing the user ends
every session of hers. The page's own app is never a service of the serving pool.
"""

from __future__ import annotations

import http.client
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.ray.conftest import LiveCluster, start_pool_cluster, stop_cluster
from tests.ray.live_helpers import job, start_lending_scheduler, wait_until
from tests.ray.page_browser import chromium_or_skip, dump_dom, parse, screenshot

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.ray, pytest.mark.timeout(600)]

GPU = "t4"
SUBMISSION = "page-test-alice-1"


@pytest.fixture(scope="module")
def browser() -> str:
    return chromium_or_skip()


@pytest.fixture(scope="module")
def cluster(browser: str) -> Iterator[LiveCluster]:
    pytest.importorskip("ray")
    live = start_pool_cluster(GPU)
    try:
        yield live
    finally:
        stop_cluster(live)


@pytest.fixture(scope="module")
def world(cluster: LiveCluster, tmp_path_factory: Any) -> dict[str, Any]:
    """The cluster after the story the module docstring tells, and the page's address."""
    import ray

    from lyra_ray.page.deploy import deploy_page
    from lyra_ray.sdk import Client

    start_lending_scheduler(cluster.workdir)
    admin_token = Client(cluster.address).add_user("admin", admin=True)
    admin = Client(cluster.address, token=admin_token)
    alice_token = admin.add_user("alice")
    cfg = ray.get(ray.get_actor("lyra-scheduler", namespace="lyra").ping.remote())["config"]
    url = deploy_page(cfg["serve_host"], cfg["serve_port"], cluster.dashboard_url)
    wait_until(lambda: len(_serving(admin)["lends"]) >= 2, 120, "both idle servers lent")
    admin.deploy_service(ROOT / "examples" / "dense" / "service.yaml")  # a plain Serve app
    wait_until(lambda: _serving(admin)["reclaims"], 180, "a server reclaimed for the service")
    tmp = tmp_path_factory.mktemp("page")
    alice_id = _ray_submit(cluster, alice_token, tmp)
    wide = job("admin-wide", 50, tmp / "wide.log", min_workers=4, max_workers=4)
    wide["throughput"] = {GPU: 1.0}
    wide_id = admin.submit(wide)
    wait_until(lambda: admin.status(alice_id)["status"] == "running", 240, "alice's job running")
    return {
        "url": url,
        "admin": admin,
        "admin_token": admin_token,
        "alice_token": alice_token,
        "jobs": {"alice": alice_id, "wide": wide_id},
        "tmp": tmp,
    }


def _serving(c: Any) -> dict[str, Any]:
    return dict(c.overview()["serving"])


def _ray_submit(cluster: LiveCluster, token: str, tmp: Path) -> str:
    """Alice's job through `ray job submit --submission-id ... -- lyra submit FILE`."""
    import yaml
    from ray.job_submission import JobStatus, JobSubmissionClient

    spec = job("alice-train", 3000, tmp / "alice.log", min_workers=2, max_workers=2)
    spec["throughput"] = {GPU: 1.0}
    (tmp / "alice.yaml").write_text(yaml.safe_dump({"jobs": [spec]}))
    jsc = JobSubmissionClient(cluster.dashboard_url)
    jsc.submit_job(
        entrypoint=f"{sys.executable} -m lyra_ray.cli submit {tmp / 'alice.yaml'}",
        submission_id=SUBMISSION,
        metadata={"lyra_user": "alice"},
        runtime_env={"env_vars": {"LYRA_TOKEN": token}},
    )
    wait_until(
        lambda: jsc.get_job_status(SUBMISSION) in (JobStatus.SUCCEEDED, JobStatus.FAILED),
        240,
        "the ray job submit driver done",
    )
    logs = jsc.get_job_logs(SUBMISSION)
    assert jsc.get_job_status(SUBMISSION) == JobStatus.SUCCEEDED, logs
    for line in logs.splitlines():  # "  lyra job <id> submitted by Ray job <submission>"
        words = line.split()
        if words[:2] == ["lyra", "job"] and words[-1] == SUBMISSION:
            return words[2]
    raise AssertionError(f"no job id in the driver's log: {logs[-2000:]}")


def _login(url: str, token: str) -> str:
    return f"{url}?token={token}"


def _render(browser: str, url: str) -> Any:
    html = dump_dom(browser, url)
    dom = parse(html)
    assert "page" in dom.ids or "login" in dom.ids, "".join(dom.text)[:2000]
    if "page" in dom.ids:  # the page's script drew the data (not only the HTML shell)
        assert "data-rendered" in html, "".join(dom.text)[:2000]
    return dom


def _jobs(dom: Any) -> dict[str, str]:
    return {e["data-job"]: e["text"] for e in dom.found if "data-job" in e}


def test_admin_page_shows_every_job_server_and_loan(browser: str, world: dict[str, Any]) -> None:
    admin = world["admin"]
    for _ in range(3):  # a job may change state between the render and the read
        dom = _render(browser, _login(world["url"], world["admin_token"]))
        view = admin.overview()
        rows = _jobs(dom)
        if all(j["status"] in rows.get(j["id"], "") for j in view["jobs"]) and _chart_matches(
            dom, view["serving"]
        ):
            break
    assert "page" in dom.ids and "login" not in dom.ids
    assert set(rows) == {j["id"] for j in view["jobs"]} == set(world["jobs"].values()), rows
    for j in view["jobs"]:
        assert j["name"] in rows[j["id"]] and j["status"] in rows[j["id"]], (j, rows)
        if j["status"] == "queued":
            assert j["reason"] and j["reason"] in rows[j["id"]], (j, rows)
    alice = next(j for j in view["jobs"] if j["id"] == world["jobs"]["alice"])
    assert alice["ray_job"] == SUBMISSION and f"Ray job {SUBMISSION}" in rows[alice["id"]]
    wide = next(j for j in view["jobs"] if j["id"] == world["jobs"]["wide"])
    assert wide["status"] == "queued", wide  # 4 GPUs: alice holds 2 of the 4 training can use
    servers = {e["data-server"]: e for e in dom.found if e.get("tag") == "li"}
    assert set(servers) == {n["id"] for n in view["nodes"]}
    for n in view["nodes"]:
        if n["pool"] == "inference":
            assert servers[n["id"]]["text"].endswith(n["state"]), (n, servers[n["id"]])
    assert sorted(n["state"] for n in view["nodes"] if n["pool"] == "inference") == [
        "lent",
        "serving",
    ]
    _assert_loan_chart(dom, view["serving"])
    shot = screenshot(
        browser, _login(world["url"], world["admin_token"]), world["tmp"] / "page.png"
    )
    assert shot.stat().st_size > 10_000
    if os.environ.get("LYRA_PAGE_SCREENSHOT"):  # docs/page.png is made this way
        shutil.copy(shot, os.environ["LYRA_PAGE_SCREENSHOT"])


def _chart(dom: Any, serving: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """(the chart's marks as drawn, the scheduler's recorded lends and reclaims)."""
    marks = sorted(
        (e["data-kind"], e["data-node"], float(e["data-at"])) for e in dom.found if "data-kind" in e
    )
    recorded = sorted(
        [("lend", str(e["node"]), float(e["at"])) for e in serving["lends"]]
        + [("reclaim", str(e["node"]), float(e["at"])) for e in serving["reclaims"]]
    )
    return marks, recorded


def _chart_matches(dom: Any, serving: dict[str, Any]) -> bool:
    marks, recorded = _chart(dom, serving)
    return marks == recorded


def _assert_loan_chart(dom: Any, serving: dict[str, Any]) -> None:
    marks, recorded = _chart(dom, serving)
    assert marks == recorded and len(recorded) >= 3, (marks, recorded)


def test_another_user_sees_only_her_jobs(browser: str, world: dict[str, Any]) -> None:
    dom = _render(browser, _login(world["url"], world["alice_token"]))
    assert set(_jobs(dom)) == {world["jobs"]["alice"]}, _jobs(dom)
    assert "admin-wide" not in "".join(dom.text)


def test_no_token_shows_a_login_form_and_nothing_else(browser: str, world: dict[str, Any]) -> None:
    for url in (world["url"], _login(world["url"], "not-a-token")):
        dom = _render(browser, url)
        assert "login" in dom.ids and "page" not in dom.ids
        assert not dom.found, dom.found
        text = "".join(dom.text)
        assert "alice-train" not in text and "admin-wide" not in text


def test_the_page_is_no_service_of_the_serving_pool(world: dict[str, Any]) -> None:
    from ray import serve

    from lyra_ray.page import APP_NAME
    from lyra_ray.sdk import SpecError

    admin = world["admin"]
    assert APP_NAME in serve.status().applications
    serving = _serving(admin)
    assert [s["name"] for s in serving["services"]] == ["dense"]
    assert serving["demand_servers"] == max(s["demand_servers"] for s in serving["services"])
    with pytest.raises(SpecError, match="'route'"):
        admin.deploy_service({"name": "sneaky", "import_path": "m:app", "route": "/lyra"})
    assert [s["name"] for s in _serving(admin)["services"]] == ["dense"]


def test_sessions_login_link_logout_and_a_removed_user(world: dict[str, Any]) -> None:
    url = world["url"]
    sid = _session(url, world["alice_token"])
    assert _get(url + "api/state", sid)[0] == 200
    assert _post(url + "logout", sid) == 303
    assert _get(url + "api/state", sid)[0] == 401
    sid = _session(url, world["alice_token"])
    assert _get(url + "api/state", sid)[0] == 200
    world["admin"].remove_user("alice")
    status, body = _get(url + "api/state", sid)
    assert status == 401 and b"withdrawn" in body, body
    assert _get(url + "api/state", sid)[0] == 401  # ended, not only refused once


def test_loan_history_survives_a_scheduler_restart(browser: str, world: dict[str, Any]) -> None:
    import ray

    admin = world["admin"]
    before = _serving(admin)
    actor = ray.get_actor("lyra-scheduler", namespace="lyra")
    restarts = ray.get(actor.ping.remote())["restarts"]
    ray.kill(actor, no_restart=False)
    wait_until(lambda: _restarts() > restarts, 120, "the scheduler restarted")
    dom = _render(browser, _login(world["url"], world["admin_token"]))
    after = _serving(admin)
    assert after["lends"][: len(before["lends"])] == before["lends"]
    assert after["reclaims"][: len(before["reclaims"])] == before["reclaims"]
    _assert_loan_chart(dom, after)


def _restarts() -> int:
    import ray

    try:
        a = ray.get_actor("lyra-scheduler", namespace="lyra")
        return int(ray.get(a.ping.remote(), timeout=5)["restarts"])
    except Exception:
        return -1


def _conn(url: str) -> tuple[http.client.HTTPConnection, str]:
    u = urlsplit(url)
    return http.client.HTTPConnection(u.hostname or "", u.port, timeout=60), u.path + (
        f"?{u.query}" if u.query else ""
    )


def _session(url: str, token: str) -> str:
    """Open the login link: a redirect to the bare page, and a session cookie."""
    c, path = _conn(_login(url, token))
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    assert r.status == 303 and r.getheader("Location") == urlsplit(url).path, r.status
    cookie = r.getheader("Set-Cookie") or ""
    assert "HttpOnly" in cookie and token not in cookie, cookie
    return cookie.split(";")[0]


def _get(url: str, cookie: str) -> tuple[int, bytes]:
    c, path = _conn(url)
    c.request("GET", path, headers={"Cookie": cookie})
    r = c.getresponse()
    return r.status, r.read()


def _post(url: str, cookie: str) -> int:
    c, path = _conn(url)
    c.request("POST", path, headers={"Cookie": cookie})
    r = c.getresponse()
    r.read()
    return r.status
