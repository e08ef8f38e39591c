"""``docs/loaning.md``'s table of how long a server's copy of a user's application takes
to deploy, by path, rendered from ``benchmarks/results/copy_deploy.json``
(``benchmarks/copy_deploy.py``)."""

from __future__ import annotations

from typing import Any

WHAT = {
    "task": "a fresh task (before the builder; after a builder died)",
    "builder": "the service's builder (every copy after the first)",
    "new builder": "a builder started for the copy (a service's first)",
}


def render(data: dict[str, Any]) -> str:
    last = data["runs"][-1]
    rows = [
        f"{last['at']}, commit {last['commit']}, {last['rounds']} copies by each path, "
        f"one core's speed {last['calibration_s']:.2f} s (`suite_cpu.calibration_s`)"
        + (f"; {last['note']}" if last["note"] else "")
        + ":",
        "",
        "| copy deployed by | median s to RUNNING | vs a fresh task | samples (s) |",
        "|---|---:|---:|---|",
    ]
    for path, p in last["paths"].items():
        samples = ", ".join(f"{x:.2f}" for x in p["samples"])
        rows.append(
            f"| {WHAT.get(path, path)} | {p['median_s']:.2f} | {p['vs_task']:.2f}x | {samples} |"
        )
    return "\n".join(rows)
