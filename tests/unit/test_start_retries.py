"""A Ray head or node that fails to start the transient ways is started again; any other
failure is raised at once (CI lost whole modules to a raylet's 30 s registration wait,
once for a head, once for a worker node right after another cluster shut down)."""

from __future__ import annotations

from typing import Any

import pytest

from lyra_ray.ops import embedded

TRANSIENT = (
    "The current node timed out during startup. This could happen because some of the "
    "raylet failed to startup or the GCS has become overloaded."
)


class Gcs:
    """The GCS's key-value store as a node's agent leaves it: its HTTP address published,
    or (``deaf``) nothing, as when the agent's port was taken."""

    def __init__(self, deaf: bool) -> None:
        self.deaf = deaf

    def internal_kv_get(self, key: bytes, namespace: bytes, timeout: float) -> bytes | None:
        assert key.startswith(b"DASHBOARD_AGENT_ADDR_NODE_ID_PREFIX:") and namespace
        return None if self.deaf else b'["127.0.0.1", 52365, 40001]'


class Node:
    def __init__(self, node_id: str, deaf: bool = False, **kwargs: Any) -> None:
        self.node_id, self.kwargs, self.gcs = node_id, kwargs, Gcs(deaf)

    def get_gcs_client(self) -> Gcs:
        return self.gcs


class FlakyCluster:
    """``add_node`` fails with ``errors`` in turn, then succeeds; the first ``deaf``
    nodes it starts have an agent that never serves HTTP."""

    def __init__(self, errors: list[Exception], deaf: int = 0) -> None:
        self.errors, self.calls, self.deaf = list(errors), 0, deaf
        self.removed: list[str] = []

    def add_node(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return Node(f"n{self.calls}", deaf=self.calls <= self.deaf, **kwargs)

    def remove_node(self, node: Node) -> None:
        self.removed.append(node.node_id)


def _live(cluster: FlakyCluster, tmp_path: Any) -> embedded.EmbeddedCluster:
    return embedded.EmbeddedCluster(cluster, "127.0.0.1:1", "http://127.0.0.1:2", tmp_path)


def test_a_node_whose_raylet_timed_out_is_started_again(tmp_path: Any) -> None:
    cluster = FlakyCluster([Exception(TRANSIENT)])
    live = _live(cluster, tmp_path)
    node = live.add_gpu_node("v100", 2)
    assert cluster.calls == 2 and node == "n2" and list(live.nodes) == ["n2"]


def test_a_node_that_keeps_failing_raises_after_the_last_try(tmp_path: Any) -> None:
    cluster = FlakyCluster([Exception(TRANSIENT)] * embedded.START_TRIES)
    with pytest.raises(Exception, match="timed out during startup"):
        _live(cluster, tmp_path).add_gpu_node("v100", 2)
    assert cluster.calls == embedded.START_TRIES


def test_any_other_failure_is_raised_at_once(tmp_path: Any) -> None:
    cluster = FlakyCluster([ValueError("num_gpus must be non-negative")])
    with pytest.raises(ValueError, match="num_gpus"):
        _live(cluster, tmp_path).add_gpu_node("v100", -1)
    assert cluster.calls == 1


def test_a_port_taken_between_its_pick_and_its_bind_is_started_again_on_fresh_ports(
    tmp_path: Any,
) -> None:
    """A port picked free can be taken by another process before Ray binds it: the
    dashboard then dies "address already in use" (seen starting a test module's head)."""
    taken = Exception(
        "Failed to find a valid port for dashboard after 0 retries: [Errno 98] error while "
        "attempting to bind on address ('127.0.0.1', 44217): address already in use"
    )
    cluster = FlakyCluster([taken])
    assert _live(cluster, tmp_path).add_gpu_node("v100", 2) == "n2"


def test_a_node_whose_agent_never_serves_http_is_removed_and_started_again(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent whose HTTP port was taken stays alive without HTTP and Ray starts the
    node regardless; on the head, every ``ray job submit`` then hung (a CI-like run)."""
    monkeypatch.setattr(embedded, "AGENT_WAIT_S", 0.3)
    cluster = FlakyCluster([], deaf=1)
    live = _live(cluster, tmp_path)
    assert live.add_gpu_node("v100", 2) == "n2"
    assert cluster.removed == ["n1"] and list(live.nodes) == ["n2"]


def test_a_head_whose_agent_never_serves_http_is_shut_down_and_started_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(embedded, "AGENT_WAIT_S", 0.3)
    made: list[Any] = []

    class Head:
        def __init__(self, initialize_head: bool, head_node_args: dict[str, Any]) -> None:
            self.head_node = Node(f"h{len(made)}", deaf=not made)
            self.args, self.down = head_node_args, False
            made.append(self)

        def shutdown(self) -> None:
            self.down = True

    cluster, dash = embedded._start_head(Head)
    assert [c.down for c in made] == [True, False] and cluster is made[1]
    assert (
        made[0].args["dashboard_agent_listen_port"] != made[1].args["dashboard_agent_listen_port"]
    )
    assert dash == made[1].args["dashboard_port"]
