"""A cluster started here never inherits another cluster's address (issue #31, item 6).

``lyra up`` prints ``export RAY_ADDRESS=...``; after ``lyra down`` that address names a
dead cluster, and Ray's State API prefers it to any address it is given. Inherited by an
embedded cluster's processes, it kept Ray Train's placement-group cleaner from freeing a
stopped run's GPUs. Ray itself is faked here: what matters is the environment the head
and the later nodes are started under, and that the caller's comes back at shutdown.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import ray
import ray.cluster_utils

from lyra_ray.ops import embedded

STALE = "127.0.0.1:1"


@pytest.fixture(autouse=True)
def _agents_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray is faked here, agents included: their check has its own tests
    (``test_start_retries.py``)."""
    monkeypatch.setattr(embedded, "_agent_serving", lambda cluster, node=None, timeout_s=None: None)


class FakeCluster:
    address = "127.0.0.1:6399"

    def __init__(self, **kw: Any) -> None:
        self.env_at_head = dict(os.environ)
        self.head_env_vars = dict(kw.get("head_node_args", {}).get("env_vars") or {})
        self.env_at_nodes: list[dict[str, str]] = []
        self.node_env_vars: list[dict[str, str]] = []

    def add_node(self, **kw: Any) -> Any:
        self.env_at_nodes.append(dict(os.environ))
        self.node_env_vars.append(dict(kw.get("env_vars") or {}))
        return type("Node", (), {"node_id": f"n{len(self.env_at_nodes)}"})()

    def wait_for_nodes(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def test_the_head_gets_no_stale_address_and_later_nodes_get_this_clusters(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for var in ("RAY_TMPDIR", "PYTHONPATH"):  # start_embedded sets these: restored after
        monkeypatch.setenv(var, os.environ.get(var, ""))
    monkeypatch.setenv("RAY_ADDRESS", STALE)
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", "http://127.0.0.1:2")
    monkeypatch.setattr(ray.cluster_utils, "Cluster", FakeCluster)
    monkeypatch.setattr(ray, "init", lambda **_: None)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    live = embedded.start_embedded(training=[("v100", 1)], inference=[("t4", 2)], workdir=tmp_path)
    fake = live.cluster
    assert "RAY_ADDRESS" not in fake.env_at_head
    assert "RAY_API_SERVER_ADDRESS" not in fake.env_at_head
    for env in fake.env_at_nodes:
        assert env["RAY_ADDRESS"] == FakeCluster.address
        assert "RAY_API_SERVER_ADDRESS" not in env
    assert os.environ["RAY_ADDRESS"] == FakeCluster.address  # this process's clients too
    live.shutdown()
    assert os.environ["RAY_ADDRESS"] == STALE  # the caller's environment as it was
    assert os.environ["RAY_API_SERVER_ADDRESS"] == "http://127.0.0.1:2"


def test_a_head_that_timed_out_during_startup_is_started_once_more() -> None:
    """Ray's fixed 30 s for a head's raylet to register ran out under load (a full
    ``make test``): the embedded cluster tries again on fresh ports, up to
    ``START_TRIES`` times; any other failure, or the last try's, is raised as it is."""
    import pytest

    from lyra_ray.ops import embedded

    calls: list[dict[str, object]] = []

    def flaky(fail: int, message: str = "The current node timed out during startup.") -> type:
        class Fake:
            def __init__(self, initialize_head: bool, head_node_args: dict[str, object]) -> None:
                calls.append(head_node_args)
                if len(calls) <= fail:
                    raise Exception(message)

        return Fake

    _cluster, dash = embedded._start_head(flaky(1))
    assert len(calls) == 2 and calls[1]["dashboard_port"] == dash
    calls.clear()
    with pytest.raises(Exception, match="timed out during startup"):
        embedded._start_head(flaky(embedded.START_TRIES))
    assert len(calls) == embedded.START_TRIES
    calls.clear()  # the dashboard dying at start (return code -6), as Ray reports it
    dashboard = "Failed to read dashboard.err file: [Errno 2] No such file or directory"
    embedded._start_head(flaky(1, dashboard))
    assert len(calls) == 2
    calls.clear()  # the GCS not publishing its port in time (RuntimeError from Ray)
    gcs = "Timed out waiting for file /tmp/ray/session_x/gcs_server_port_51db4062276691b2afe8"
    embedded._start_head(flaky(1, gcs))
    assert len(calls) == 2
    calls.clear()
    with pytest.raises(Exception, match="port is taken"):
        embedded._start_head(flaky(1, "port is taken"))
    assert len(calls) == 1


def test_a_failed_head_start_leaves_no_process_behind() -> None:
    """Ray raises from inside the node's constructor, so the processes a failed attempt
    started (its GCS, raylet, dashboard) have no owner: the embedded cluster ends them."""
    import subprocess
    import sys

    from lyra_ray.ops import embedded

    started: list[subprocess.Popen[bytes]] = []

    class Fake:
        def __init__(self, initialize_head: bool, head_node_args: dict[str, object]) -> None:
            sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
            started.append(subprocess.Popen(sleeper))
            if len(started) == 1:
                raise Exception("The current node timed out during startup.")

    try:
        embedded._start_head(Fake)
        assert len(started) == 2
        assert started[0].poll() is not None  # the failed attempt's process: ended
        assert started[1].poll() is None  # the started head's: left running
        assert started[1].pid in embedded._children()
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def test_shutdown_keeps_the_workdir_it_was_given(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The scheduler's state and the jobs' checkpoints are the caller's: the product never
    deletes them (the tests and benchmarks remove their own directories)."""
    for var in ("RAY_TMPDIR", "PYTHONPATH", "RAY_ADDRESS"):
        monkeypatch.setenv(var, os.environ.get(var, ""))
    monkeypatch.setattr(ray.cluster_utils, "Cluster", FakeCluster)
    monkeypatch.setattr(ray, "init", lambda **_: None)
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    live = embedded.start_embedded(training=[("v100", 1)], workdir=tmp_path / "mine")
    assert live.workdir == tmp_path / "mine"
    (live.workdir / "ckpt").mkdir(parents=True)
    (live.workdir / "ckpt" / "model.pt").write_bytes(b"x" * 1024)
    live.shutdown()
    assert (live.workdir / "ckpt" / "model.pt").read_bytes() == b"x" * 1024


def test_every_node_gets_lyras_node_defaults_unless_the_caller_set_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Serve's controller (on the head) gives a new HTTP proxy
    ``PROXY_READY_CHECK_S`` a check, not Serve's 5 s: under load a proxy still starting
    was killed three checks in, again and again (``client/quiet.py``). A value the
    caller's environment sets is theirs: the node inherits it, lyra adds nothing."""
    from lyra_ray.client.quiet import NODE_DEFAULTS, PROXY_READY_CHECK_S

    for var in ("RAY_TMPDIR", "PYTHONPATH", "RAY_ADDRESS"):
        monkeypatch.setenv(var, os.environ.get(var, ""))
    for var in NODE_DEFAULTS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(ray.cluster_utils, "Cluster", FakeCluster)
    monkeypatch.setattr(ray, "init", lambda **_: None)
    live = embedded.start_embedded(inference=[("t4", 2)], workdir=tmp_path)
    fake = live.cluster
    ready = "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"
    assert fake.head_env_vars[ready] == PROXY_READY_CHECK_S
    (node,) = fake.node_env_vars
    assert node[ready] == PROXY_READY_CHECK_S and "RAY_SERVE_WORKER_PROXY_HTTP_PORT" in node
    live.shutdown()

    monkeypatch.setenv(ready, "7")
    live = embedded.start_embedded(inference=[("t4", 2)], workdir=tmp_path)
    assert ready not in live.cluster.head_env_vars  # inherited as the caller set it
    assert ready not in live.cluster.node_env_vars[0]
    live.shutdown()


def test_a_ray_start_node_gets_the_defaults_under_the_callers_own() -> None:
    from lyra_ray.client.quiet import NODE_DEFAULTS, node_env, node_env_vars

    got = node_env({"PATH": "/bin"})
    assert got["PATH"] == "/bin" and NODE_DEFAULTS.items() <= got.items()
    mine = {"RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S": "60"}
    assert node_env(mine)["RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S"] == "60"
    assert "RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S" not in node_env_vars(mine)
