"""``docs/testing.md``'s tables, rendered from ``benchmarks/results/suite_times.json``
(``benchmarks/suite_times.py`` reading ``make test``'s JUnit XML)."""

from __future__ import annotations

from typing import Any

TOP = 12
"""Modules listed by time: the ones worth making faster."""


def runs(data: dict[str, Any]) -> str:
    rows = [
        "| run | commit | tests | failed | skipped | pytest's time | note |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for r in data["runs"]:
        rows.append(
            f"| {r['at']} | {r['commit']} | {r['tests']} | {r['failures']} | {r['skipped']} "
            f"| {r['wall_s'] / 60:.1f} min | {r['note']} |"
        )
    return "\n".join(rows)


def newest_passed(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The newest recorded run that passed (else the newest): a failed run's seconds hold
    its timeouts (a unit module that hung 900 s). The tier table shows it, and
    ``tests/conftest.py`` orders the modules by it."""
    return ([r for r in runs if not r.get("failures")] or runs)[-1]


def tiers(data: dict[str, Any]) -> str:
    last = newest_passed(data["runs"])
    total = sum(t["seconds"] for t in last["tiers"].values()) or 1.0
    # Said only where true: tests that ran in two processes at once sum past the wall time.
    overlap = (
        "; tests ran side by side, so they sum past the wall time" if total > last["wall_s"] else ""
    )
    rows = [
        f"Newest run that passed ({last['at']}, {last['commit']}); seconds summed over each "
        "tier's tests "
        f"(fixtures included, so a module's cluster start counts in its first test{overlap}).",
        "",
        "| tier | modules | tests | seconds | share |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, t in sorted(last["tiers"].items(), key=lambda kv: -kv[1]["seconds"]):
        rows.append(
            f"| `tests/{name}` | {t['modules']} | {t['tests']} | {t['seconds']:.0f} "
            f"| {100 * t['seconds'] / total:.0f} % |"
        )
    rows += [
        "",
        f"The {TOP} longest modules:",
        "",
        "| module | tests | seconds |",
        "|---|---:|---:|",
    ]
    for mod, m in list(last["modules"].items())[:TOP]:
        rows.append(f"| `{mod}` | {m['tests']} | {m['seconds']:.0f} |")
    return "\n".join(rows)
