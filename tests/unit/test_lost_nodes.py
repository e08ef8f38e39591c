"""A failed live test's report names the nodes its cluster lost, with their raylets'
last lines (tests/lost_nodes.py)."""

from __future__ import annotations

from pathlib import Path

from tests.lost_nodes import lost_nodes_report


def _raylet(logs: Path, name: str, node: str, last: str) -> None:
    (logs / f"{name}.out").write_text(
        f"[x] (raylet) main.cc:711: Setting node ID node_id={node}\nstarted\n{last}\n"
    )
    (logs / f"{name}.err").write_text(f"{last} (err)\n")


def test_a_dead_node_is_named_with_its_own_raylets_tail(tmp_path: Path) -> None:
    _raylet(tmp_path, "raylet", "aaa", "head fine")
    _raylet(tmp_path, "raylet.1", "bbb", "SIGTERM received")
    nodes = [
        {"NodeID": "aaa", "Alive": True},
        {"NodeID": "bbb", "Alive": False, "Labels": {"pool": "inference"},
         "DeathReasonMessage": "raylet exited"},
    ]  # fmt: skip
    text = lost_nodes_report(nodes, tmp_path, lines=2)
    assert text.splitlines()[0].startswith("node bbb lost (labels {'pool': 'inference'}")
    assert "raylet exited" in text and "raylet.1.out, last 2 lines:" in text
    assert "SIGTERM received (err)" in text and "head fine" not in text


def test_nothing_lost_says_nothing_and_a_missing_log_is_said(tmp_path: Path) -> None:
    assert lost_nodes_report([{"NodeID": "aaa", "Alive": True}], tmp_path) == ""
    text = lost_nodes_report([{"NodeID": "ccc", "Alive": False}], tmp_path / "gone")
    assert "node ccc lost" in text and "no raylet log names it" in text
