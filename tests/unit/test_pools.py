"""The one grammar for a pool (lyra_ray/model/pools.py), and every flag that takes one:
``lyra simulate --cluster/--inference/--gpus-per-node``, ``lyra up --nodes/--inference``
and ``lyra plan --gpus``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lyra_ray.cli import main
from lyra_ray.model.errors import InputError
from lyra_ray.model.pools import NodePool, PoolItem, check_gpus_per_node, parse_pool
from lyra_ray.model.spec import parse_cluster
from lyra_ray.ops.local import parse_nodes

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "lyra_ray" / "data" / "demo_jobs.yaml"
BAD = [
    "",
    "   ",
    "v100",
    "v100=",
    "=4",
    "v100=0",
    "v100=-2",
    "v100=nan",
    "v100=inf",
    "v100=1e3",
    "v100=2.5",
    "v100=0x4",
    "v100=2x0",
    "v100=2x4x1",
    "v100=4,v100=2",
    "v100=4,V100=2",
    "v100=4,",
    "v100=" + "9" * 5000,
    "v100=1000001",
    "v100=2000x1000",
    "v100=1x5000",
    "4v=1",
]


def test_the_grammar() -> None:
    pool = parse_pool(" V100=2x4 , k80=3 ", "--x")
    assert pool == NodePool((PoolItem("v100", 8, 4), PoolItem("k80", 3, None)))
    assert pool.gpus() == {"v100": 8, "k80": 3}
    assert pool.servers() == [("v100", 4), ("v100", 4), ("k80", 1), ("k80", 1), ("k80", 1)]
    assert pool.servers(2) == [("v100", 4), ("v100", 4), ("k80", 2), ("k80", 1)]
    nodes = pool.nodes(2, "inference", "inf-")
    assert [(n.id, n.num_gpus, n.pool) for n in nodes][-2:] == [
        ("inf-k80-0", 2, "inference"),
        ("inf-k80-1", 1, "inference"),
    ]


@pytest.mark.parametrize("text", BAD, ids=repr)
def test_bad_pools_are_one_line_naming_the_flag(text: str) -> None:
    with pytest.raises(InputError) as e:
        parse_pool(text, "--flag")
    msg = str(e.value)
    assert msg.startswith("--flag: ") and "\n" not in msg and len(msg) < 400


@pytest.mark.parametrize("value", [None, 3, 4.0, ["v100=1"]])
def test_a_pool_that_is_not_text_names_the_field(value: object) -> None:
    with pytest.raises(InputError, match="lyra config: field 'quota': expected TYPE="):
        parse_pool(value, "lyra config: field 'quota'")


@pytest.mark.parametrize("value", [0, -1, 4097, 10**30, True, 2.0, "4"])
def test_gpus_per_node_is_bounded(value: object) -> None:
    with pytest.raises(InputError, match="--gpus-per-node"):
        check_gpus_per_node(value)


def test_type_n_means_n_gpus_in_every_command() -> None:
    """``v100=8`` is eight V100s: in servers of --gpus-per-node (simulate), of one GPU
    (up); ``v100=2x4`` is the same eight in two servers of four, everywhere."""
    shorthand = parse_cluster("v100=8", gpus_per_node=4)
    explicit = parse_cluster("v100=2x4")
    assert [(n.id, n.num_gpus) for n in shorthand] == [(n.id, n.num_gpus) for n in explicit]
    assert parse_nodes("v100=8") == [("v100", 8, 1)]
    assert parse_nodes("v100=2x4,t4=1") == [("v100", 2, 4), ("t4", 1, 1)]
    assert sum(n.num_gpus for n in parse_cluster("v100=8")) == 8


def test_a_local_cluster_keeps_its_host_limits() -> None:
    with pytest.raises(InputError, match="--inference: t4: 65 nodes of 1 GPUs"):
        parse_nodes("t4=65", "--inference")
    with pytest.raises(InputError, match="--nodes: v100: 1 nodes of 65 GPUs"):
        parse_nodes("v100=1x65")


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--cluster", "v100=0"], "--cluster"),
        (["--cluster", "v100=2x4,v100=1"], "--cluster"),
        (["--cluster", "v100=1e300"], "--cluster"),
        (["--cluster", ""], "--cluster"),
        (["--inference", "t4=nan"], "--inference"),
        (["--inference", "t4=2x0"], "--inference"),
        (["--gpus-per-node", "0"], "--gpus-per-node"),
        (["--gpus-per-node", "100000"], "--gpus-per-node"),
    ],
)
def test_simulate_pool_flags(
    flags: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--quiet", "--trace", str(DEMO), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"lyra: error: {flag}"), err


def test_simulate_takes_nodes_x_gpus(tmp_path: Path) -> None:
    out = []
    for flags in (
        ["--cluster", "v100=8,k80=8", "--gpus-per-node", "4"],
        ["--cluster", "v100=2x4,k80=2x4"],
    ):
        path = tmp_path / "out.json"
        argv = ["simulate", "--quiet", "--trace", str(DEMO), *flags, "--json", str(path)]
        assert main(argv) == 0
        doc = json.loads(path.read_text())
        out.append({k: v for k, v in doc.items() if k not in ("wall_s", "meta")})
    assert out[0] == out[1]  # the same cluster, so the same simulation


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--nodes", "v100=0"], "--nodes"),
        (["--nodes", "v100=2x4,v100=1"], "--nodes"),
        (["--nodes", "v100=65"], "--nodes"),
        (["--inference", "t4=-1"], "--inference"),
        (["--inference", ""], "--inference"),
    ],
)
def test_up_pool_flags_are_refused_before_anything_starts(
    flags: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["up", "--local", "--dir", str(tmp_path / "home"), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"lyra: error: {flag}"), err
    assert not (tmp_path / "home" / "up.json").exists()


def test_plan_gpus_in_the_grammar(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--model", "gpt-1.3b", "--batch", "64", "--top", "1"]
    assert main([*base, "--gpus", "a100=2x8"]) == 0
    explicit = capsys.readouterr().out
    assert main([*base, "--gpus", "a100=16", "--gpus-per-server", "8"]) == 0
    assert capsys.readouterr().out == explicit
    for gpus, extra in (("a100=2x8,v100=4", []), ("a100=2x8", ["--gpus-per-server", "4"])):
        assert main([*base, "--gpus", gpus, *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith("lyra: error: --gpus"), err
