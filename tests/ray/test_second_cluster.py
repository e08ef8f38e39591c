"""One process, two clusters in turn: what every ``make test`` run does, one cluster per
module, and what an embedded ``lyra`` run after another does.

The fault it guards against: Serve keeps its controller client in a module global and
trusts it while the driver's job id matches, and every fresh cluster numbers its first
driver job ``01000000`` again. A driver that used Serve on one cluster then reached the
dead controller of that cluster from the next ("Can't find actor ... from a different
cluster"), which CI met as ``serve.status()`` failing in the loaning module after the
chaos modules. :func:`lyra_ray.ops.embedded.disconnect` forgets that client; this test
proves the second cluster's Serve answers for itself.
"""

from __future__ import annotations

import pytest

from tests.ray.conftest import start_cluster, stop_cluster

pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]


def _serve_once() -> tuple[str, list[str]]:
    """Serve started on the connected cluster by another process (as lyra's scheduler
    starts it), then asked from this driver: the job id the driver has and the
    applications Serve lists."""
    import ray
    from ray import serve

    @ray.remote(num_cpus=0)
    def start() -> None:
        serve.start(http_options={"host": "127.0.0.1", "port": 0})

    ray.get(start.remote())
    return ray.get_runtime_context().get_job_id(), sorted(serve.status().applications)


def test_serve_on_a_second_cluster_answers_for_that_cluster() -> None:
    pytest.importorskip("ray")
    from ray import serve

    first = start_cluster(nodes=())
    try:
        job_a, apps_a = _serve_once()

        @serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 0})
        def hello() -> str:
            return "first cluster"

        serve.run(hello.bind(), name="only-on-the-first", route_prefix=None)
        assert "only-on-the-first" in serve.status().applications
    finally:
        stop_cluster(first)
    second = start_cluster(nodes=())
    try:
        job_b, apps_b = _serve_once()
    finally:
        stop_cluster(second)
    assert job_a == job_b, (job_a, job_b)  # the collision the fix is for: same job id
    assert apps_a == [] and apps_b == [], (apps_a, apps_b)  # the first app did not follow
