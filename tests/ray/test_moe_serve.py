"""The MoE Serve app on a real local Ray cluster: exact outputs, live re-plan via the scaler."""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

pytestmark = pytest.mark.ray

ray = pytest.importorskip("ray")
from ray import serve  # noqa: E402
from ray.util.state import list_actors  # noqa: E402

from lyra_ray.moe_serving.app import APP_NAME, build_app, expert_name  # noqa: E402
from lyra_ray.moe_serving.dynamic import chunk_hosts  # noqa: E402
from lyra_ray.moe_serving.local_cluster import LocalCluster, local_cluster  # noqa: E402
from lyra_ray.moe_serving.model import MoEConfig, MoEModel  # noqa: E402
from lyra_ray.moe_serving.planner import plan_lina  # noqa: E402
from lyra_ray.moe_serving.popularity import load_counts  # noqa: E402
from lyra_ray.moe_serving.scaler import Replanner, running_replicas  # noqa: E402
from lyra_ray.moe_serving.workload import sample_batch, topic_mix  # noqa: E402

CFG = MoEConfig(layers=2, experts=4, top_k=2, skew=1.5, correlation=0.9, seed=3)
BUDGET = 6  # replicas per layer
DEVICES = 6


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    os.environ["RAY_AUTH_MODE"] = "disabled"
    tmp = os.environ.get("RAY_TMPDIR", f"/tmp/ray-moe-test-{os.getpid()}")
    with local_cluster(num_cpus=2, num_gpus=DEVICES, object_store_mb=150, temp_dir=tmp) as lc:
        yield lc


@pytest.fixture(scope="module")
def deployed(cluster: LocalCluster) -> tuple[MoEModel, object]:
    model = MoEModel(CFG)
    # Plan for the *wrong* traffic (topic 0 only) so that real traffic must trigger phase 2.
    rng = np.random.default_rng(0)
    routes = model.run(sample_batch(CFG, rng, 32, 8, topic_mix(CFG.topics, [0], 1.0)))[1]
    plan = plan_lina(load_counts(routes.numpy(), CFG.experts), BUDGET, DEVICES)
    app = build_app(model, plan.counts, gpus_per_replica=0.5)
    handle = serve.run(app, name=APP_NAME, external_scaler_enabled=True)
    return model, (handle, plan)


def _replica_ids() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for a in list_actors(filters=[("state", "=", "ALIVE")], limit=10_000):
        prefix = f"ServeReplica:{APP_NAME}:"
        if a.class_name.startswith(prefix):
            out.setdefault(a.class_name[len(prefix) :], set()).add(a.actor_id)
    return out


def test_served_output_equals_in_process(deployed: tuple[MoEModel, object]) -> None:
    model, (handle, _) = deployed
    rng = np.random.default_rng(1)
    for mix in (None, topic_mix(CFG.topics, [2])):
        tokens = sample_batch(CFG, rng, 6, 8, mix)
        served = handle.remote(tokens.numpy()).result(timeout_s=60)  # type: ignore[attr-defined]
        ref, _ = model.run(tokens)
        assert served.shape == tuple(ref.shape)
        np.testing.assert_allclose(served, ref.numpy(), atol=1e-5)


def test_borrowed_chunks_fetch_parameters_and_keep_outputs_exact(
    deployed: tuple[MoEModel, object],
) -> None:
    """Traffic unlike the plan's: chunks run on other experts' replicas, output unchanged."""
    model, (handle, plan) = deployed
    tokens = sample_batch(CFG, np.random.default_rng(5), 8, 8, topic_mix(CFG.topics, [3], 1.0))
    ref, routes = model.run(tokens)
    counts = load_counts(routes.numpy(), CFG.experts).astype(np.int64)
    home = plan.counts  # type: ignore[attr-defined]
    expected = sum(
        sum(h != e for e, hs in enumerate(chunk_hosts(counts[i], home[i])) for h in hs)
        for i in range(CFG.layers)
    )
    assert expected > 0, "the request must need more chunks of some expert than it has"
    handle.take_dispatch_stats.remote().result(timeout_s=60)  # type: ignore[attr-defined]
    try:
        for borrow in (True, False):
            handle.set_borrow.remote(borrow).result(timeout_s=60)  # type: ignore[attr-defined]
            served = handle.remote(tokens.numpy()).result(timeout_s=60)  # type: ignore[attr-defined]
            np.testing.assert_allclose(served, ref.numpy(), atol=1e-5)
            stats = handle.take_dispatch_stats.remote().result(timeout_s=60)  # type: ignore[attr-defined]
            assert stats["borrowed"] == (expected if borrow else 0)
            if borrow:  # fresh replicas hold no borrowed expert yet
                assert stats["fetched"] >= 1
    finally:
        handle.set_borrow.remote(True).result(timeout_s=60)  # type: ignore[attr-defined]


def test_replan_applies_new_counts_without_restarting_kept_replicas(
    cluster: LocalCluster, deployed: tuple[MoEModel, object]
) -> None:
    model, (handle, plan) = deployed
    before_counts = plan.counts.copy()  # type: ignore[attr-defined]
    before_ids = _replica_ids()
    handle.take_window.remote().result(timeout_s=60)  # type: ignore[attr-defined]
    rng = np.random.default_rng(2)
    mix = topic_mix(CFG.topics, [3], 1.0)
    batches = [sample_batch(CFG, rng, 8, 8, mix) for _ in range(4)]
    for t in batches:
        handle.remote(t.numpy()).result(timeout_s=60)  # type: ignore[attr-defined]

    rp = Replanner(plan, cluster.dashboard_url, threshold=0.05)  # type: ignore[arg-type]
    layers = rp.step()
    after_counts = rp.placement.counts
    assert layers, "traffic differs from the planned mix, phase 2 must re-plan"
    assert not np.array_equal(after_counts, before_counts)
    assert (after_counts >= 1).all() and (after_counts.sum(1) == BUDGET).all()

    running = running_replicas()
    after_ids = _replica_ids()
    for layer in range(CFG.layers):
        for e in range(CFG.experts):
            name = expert_name(layer, e)
            assert running[name] == after_counts[layer, e]
            if after_counts[layer, e] >= before_counts[layer, e]:
                assert before_ids[name] <= after_ids[name], f"{name} replicas were restarted"
            else:  # scaled down: the survivors are old replicas, nothing new was started
                assert after_ids[name] <= before_ids[name], f"{name} got new replicas"
    assert before_ids["moe_ingress"] == after_ids["moe_ingress"]

    tokens = batches[0]
    served = handle.remote(tokens.numpy()).result(timeout_s=60)  # type: ignore[attr-defined]
    np.testing.assert_allclose(served, model.run(tokens)[0].numpy(), atol=1e-5)


def test_per_expert_metrics_are_exported(
    cluster: LocalCluster, deployed: tuple[MoEModel, object]
) -> None:
    """ray.util.metrics from the ingress reach the node's Prometheus endpoint, per expert."""
    _, (handle, _) = deployed
    tokens = sample_batch(CFG, np.random.default_rng(4), 4, 8)
    deadline = time.monotonic() + 90
    text = ""
    while time.monotonic() < deadline:
        handle.remote(tokens.numpy()).result(timeout_s=60)  # type: ignore[attr-defined]
        with urllib.request.urlopen(cluster.metrics_url, timeout=10) as resp:
            text = resp.read().decode()
        if "ray_moe_expert_tokens" in text and "ray_moe_expert_call_ms" in text:
            break
        time.sleep(3)
    lines = [ln for ln in text.splitlines() if ln.startswith("ray_moe_expert_tokens")]
    assert lines, "moe_expert_tokens never appeared on the metrics endpoint"
    assert any('layer="0"' in ln and 'expert="' in ln for ln in lines)
