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


class FlakyCluster:
    """``add_node`` fails with ``errors`` in turn, then succeeds."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors, self.calls = list(errors), 0

    def add_node(self, **kwargs: Any) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return type("Node", (), {"node_id": f"n{self.calls}", "kwargs": kwargs})()


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
