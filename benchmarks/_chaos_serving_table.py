"""The serving-under-faults table of ``docs/reliability.md`` (issue #31, item 5), rendered
from the ``serving_*`` figures of ``benchmarks/results/chaos.json`` (``python
benchmarks/chaos.py --only serving`` writes them from ``tests/chaos/test_chaos_serving.py``)."""

from __future__ import annotations

from typing import Any

FAULTS = (
    ("serving_replica_kill", "a dense replica's process SIGKILLed"),
    ("serving_replica_kill_mid_stream", "a GPU replica of the user's app SIGKILLed mid-stream"),
    ("serving_ingress_kill", "the service's ingress replica SIGKILLed"),
    ("serving_scheduler_kill_mid_reclaim", "the scheduler killed while a reclaim runs"),
    ("serving_node_loss", "a serving inference server's node killed"),
)


def _errors(r: dict[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in sorted(r["failures"].items())]
    parts += [f"retried after {k} {v}" for k, v in sorted(r["retried"].items())]
    return ", ".join(parts) or "none"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v / 1000:.1f} s" if v >= 1000 else f"{v:.0f} ms"


def render(result: dict[str, Any]) -> str:
    fig, step = result["figures"], result["steps"].get("serving")
    rows = [
        "| fault | service | requests | failed | failed without the client's retry "
        "| errors (HTTP status) | p99 | capacity back and views agreeing | after recovery |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, what in FAULTS:
        f = fig.get(key)
        if f is None:
            continue
        for name in [n for n in ("dense", "user", "moe") if n in f]:
            r, after = f[name], f.get("after", {}).get(name)
            later = "—" if after is None else f"{after['failed']} of {after['sent']} failed"
            rows.append(
                f"| {what} | {name} | {r['sent']} | {r['failed']} | "
                f"{r['failed_without_retry']} | {_errors(r)} | {_ms(r['p99_ms'])} | "
                f"{f['recovered_s']} s | {later} |"
            )
    if step is None:
        return "\n".join(rows)
    ok = "passed" if step["exit_code"] == 0 else "FAILED"
    return "\n".join([*rows, "", f"`{step['command']}` ({ok}, {step['wall_s']} s)"])
