"""docs/reliability.md's scale table, from ``benchmarks/results/scale.json``
(``benchmarks/scale_cycle.py``): the live cycle at 1,000 and 10,000 queued jobs, the
incremental store beside the whole-state one, in one run."""

from __future__ import annotations

from typing import Any


def _kb(x: float | None) -> str:
    return "—" if x is None else f"{x / 1000:,.0f} kB"


def render(data: dict[str, Any]) -> str:
    head = (
        "| policy | queued | store | teams | cycle p50 / p99 / max | decide p50 / p99 "
        "| load avg | commit p50 / p99 | bytes a quiet cycle (p50 / max) | peak RSS |\n"
        "|---|---:|---|---:|---|---|---:|---|---|---:|\n"
    )
    rows = []
    for r in data["runs"]:
        rows.append(
            f"| {r['policy']} | {r['queued']:,} | {r['store']} | {_teams(r)} "
            f"| {r['cycle_p50_ms']:.1f} / {r['cycle_p99_ms']:.1f} / {r['cycle_max_ms']:.0f} ms "
            f"| {r['step_p50_ms']:.1f} / {r['step_p99_ms']:.1f} ms "
            f"| {r['loadavg_1m']:.2f} "
            f"| {r['commit_ms_p50']:.1f} / {r['commit_ms_p99']:.1f} ms "
            f"| {_kb(r['quiet_cycle_bytes_p50'])} / {_kb(r['quiet_cycle_bytes_max'])} "
            f"| {r['maxrss_mb']:.0f} MB |"
        )
    tail = (
        f"\n\n{data['gpus']:,} GPUs, round {data['round_s']:.0f} s, a cycle every "
        f"{data['period_s']:g} s of virtual time, {data['runs'][0]['cycles']} cycles measured "
        f"per row after {data.get('warm', 30)} to warm up; host of {data['cpus']} CPUs. "
        f"`{data['command'].strip()}`"
    )
    return head + "\n".join(rows) + tail + _ratios(data["runs"]) + _boundaries(data["runs"])


def _teams(r: dict[str, Any]) -> str:
    """Limited teams in the run (runs from before teams were measured had none)."""
    n = int(r.get("teams", 0))
    return f"{n} limited" if n else "none"


def _boundaries(runs: list[dict[str, Any]]) -> str:
    """The round-boundary cycles apart from the others, and the pauses moved between
    cycles, so not in the cycle times: the collector's (``runtime/gc_pacing.py``) and
    the store's WAL checkpoints (``runtime/wal_pacing.py``)."""
    parts = []
    for r in runs:
        if "boundary_cycles" not in r:
            return ""  # a results file from before these were measured
        gc = f"collector between cycles p99 {r['gc_between_p99_ms']:.1f} ms"
        if r["gc_full_count"]:
            gc += f", {r['gc_full_count']} full up to {r['gc_full_max_ms']:.0f} ms"
        if r.get("wal_between_p99_ms") is not None:  # runtime/wal_pacing.py's checkpoints
            gc += f", WAL checkpoints between cycles p99 {r['wal_between_p99_ms']:.1f} ms"
        who = f" {r['teams']} teams" if r.get("teams") else ""
        parts.append(
            f"{r['policy']} {r['queued']:,} {r['store']}{who}: {r['boundary_cycles']} round "
            f"boundaries, slowest {r['boundary_cycle_max_ms']:.0f} ms, other cycles' max "
            f"{r['other_cycle_max_ms']:.0f} ms; {gc}"
        )
    return "\n\nRound-boundary cycles, and the pauses between cycles: " + "; ".join(parts) + "."


def _ratios(runs: list[dict[str, Any]]) -> str:
    """Bytes of a quiet cycle at the largest queue over the smallest, per policy and store
    (the acceptance of issue #33: at most 1.2x)."""
    out = []
    for policy in dict.fromkeys(r["policy"] for r in runs):
        for store in dict.fromkeys(r["store"] for r in runs):
            rs = sorted(
                (
                    r
                    for r in runs
                    if r["policy"] == policy and r["store"] == store and not r.get("teams")
                ),
                key=lambda r: r["queued"],
            )
            if len(rs) < 2 or not rs[0]["quiet_cycle_bytes_p50"]:
                continue
            x = rs[-1]["quiet_cycle_bytes_p50"] / rs[0]["quiet_cycle_bytes_p50"]
            out.append(f"{policy} {store} {x:.2f}x")
    if not out:
        return ""
    lo, hi = min(r["queued"] for r in runs), max(r["queued"] for r in runs)
    return f"\n\nBytes of a quiet cycle at {hi:,} over {lo:,} queued (p50): " + ", ".join(out) + "."
