from lyra_ray.model import Assignment, ClusterSnapshot, Node, ThroughputModel
from lyra_ray.placement.placer import ConsolidatingPlacer


def snap(nodes: list[Node], lent: frozenset[str] = frozenset()) -> ClusterSnapshot:
    return ClusterSnapshot(0.0, tuple(nodes), (), ThroughputModel(), lent_nodes=lent)


NODES = [Node("a", "v100", 4), Node("b", "v100", 4), Node("c", "v100", 2), Node("k", "k80", 4)]


def test_gang_on_one_node_best_fit() -> None:
    out = ConsolidatingPlacer().place({"j": Assignment("v100", 2)}, snap(NODES), {})
    assert out["j"].nodes == (("c", 2),)  # the tightest node that holds the whole gang


def test_spans_fewest_nodes_and_all_or_nothing() -> None:
    p = ConsolidatingPlacer()
    out = p.place({"big": Assignment("v100", 8), "x": Assignment("v100", 4)}, snap(NODES), {})
    assert out["big"].nodes == (("a", 4), ("b", 4))
    assert "x" not in out  # only 2 v100 left: the 4-GPU gang is not split into a partial run


def test_unchanged_job_keeps_nodes_and_elastic_shrinks_lent_first() -> None:
    nodes = [*NODES, Node("t0", "v100", 1, "inference")]
    prev = {"j": Assignment("v100", 3, (("b", 2), ("t0", 1)))}
    out = ConsolidatingPlacer().place(
        {"j": Assignment("v100", 2)}, snap(nodes, frozenset({"t0"})), prev
    )
    assert out["j"].nodes == (("b", 2),)
    same = ConsolidatingPlacer().place(
        {"j": Assignment("v100", 3)}, snap(nodes, frozenset({"t0"})), prev
    )
    assert same["j"] == prev["j"]


def test_elastic_grows_in_place() -> None:
    prev = {"j": Assignment("v100", 2, (("a", 2),))}
    out = ConsolidatingPlacer().place({"j": Assignment("v100", 4)}, snap(NODES), prev)
    assert out["j"].nodes == (("a", 4),)


def test_pair_shares_gpus() -> None:
    desired = {"x": Assignment("k80", 2, partner="y"), "y": Assignment("k80", 1, partner="x")}
    out = ConsolidatingPlacer().place(desired, snap(NODES), {})
    assert out["x"].nodes == (("k", 2),) and out["y"].nodes == (("k", 1),)


def test_unlent_inference_node_is_never_used() -> None:
    nodes = [Node("t0", "t4", 4, "inference")]
    assert ConsolidatingPlacer().place({"j": Assignment("t4", 1)}, snap(nodes), {}) == {}
