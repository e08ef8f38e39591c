"""``lyra status --watch``'s view, rendered from an overview at 80 columns."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from lyra_ray.cli.watch import render


def _view() -> dict[str, Any]:
    nodes = [
        {
            "id": "train-node-0",
            "gpu_type": "v100",
            "pool": "training",
            "gpus": 4,
            "state": "training",
        },
        {"id": "a" * 40, "gpu_type": "t4", "pool": "inference", "gpus": 2, "state": "lent"},
        {"id": "b" * 40, "gpu_type": "t4", "pool": "inference", "gpus": 2, "state": "serving"},
    ]

    def job(jid: str, status: str, nodes: list[list[Any]] | None, done: float) -> dict[str, Any]:
        a = (
            {"gpu_type": "v100", "workers": sum(g for _, g in nodes), "nodes": nodes}
            if nodes
            else None
        )
        return {
            "id": jid,
            "name": jid.rsplit("-", 2)[0],
            "status": status,
            "assignment": a,
            "steps_done": done,
            "total_steps": 1000,
            "min_workers": 1,
            "max_workers": 4,
            "queued_s": 12.0,
        }

    jobs = [
        job("transformer-elastic-0001-ab12", "running", [["train-node-0", 3]], 250),
        job("transformer-elastic-0002-cd34", "running", [["a" * 40, 1]], 900),
        job("bert-finetune-0003-ef56", "queued", None, 0),
        job("bert-finetune-0004-0a0b", "finished", None, 1000),
    ]
    serving = {"demand_servers": 1, "services": [], "reclaims": [{"latency_s": 17.5}]}
    rounds = {"policy": "lyra", "round_s": 360.0, "rounds_done": 4, "next_round_s": 1100.0}
    return {"nodes": nodes, "jobs": jobs, "serving": serving, "rounds": rounds}


def _text(view: dict[str, Any], now: float = 1000.0) -> str:
    console = Console(width=80, record=True, color_system=None)
    console.print(render(view, now=now))
    return console.export_text()


def test_the_view_fits_80_columns_and_never_cuts_a_job_id() -> None:
    out = _text(_view())
    assert max(len(line) for line in out.splitlines()) <= 80, out
    for jid in ("transformer-elastic-0001-ab12", "transformer-elastic-0002-cd34"):
        assert jid in out, out
    assert "bert-finetune-0003-ef56" in out  # queued
    assert "bert-finetune-0004-0a0b" not in out  # finished jobs leave the view
    assert "policy lyra | round 5, next in 100 s | 1 finished, 1 queued, 2 running" in out


def test_pools_count_training_serving_lent_and_idle() -> None:
    out = _text(_view())
    cells = [[c.strip() for c in ln.strip().strip("│").split("│")] for ln in out.splitlines()]
    rows = {tuple(c[:2]): c[2:] for c in cells if c[0] in ("training", "inference")}
    # nodes, GPUs, train, serve, lent, idle
    assert rows[("training", "v100")] == ["1", "4", "3", "0", "0", "1"], out
    assert rows[("inference", "t4")] == ["2", "4", "0", "2", "1", "1"], out
    assert "1 server(s) lent, 1 reclaimed (last took 17.5 s)" in out
    assert "250/1,000" in out and "900/1,000" in out


def test_without_rounds_or_jobs() -> None:
    view = _view()
    view["jobs"], view["rounds"] = [], {"policy": "fifo", "next_round_s": None}
    out = _text(view)
    assert "policy fifo | no rounds running | no jobs" in out
