"""Markdown tables of ``benchmarks/network.py``'s JSON (the tables of docs/network.md)."""

from __future__ import annotations

from typing import Any

SCHEDS = ("fair", "coflow", "echelon", "lina")
JOBS = ("dp", "pp", "tp", "fsdp")
RUNS = ("free", "consolidate", "ring")
LINA_PAPER = 1.73


def _ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def _patterns(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| case | job | no network | " + " | ".join(SCHEDS) + " | fair / echelon |",
        "|---|---|" + "---:|" * (len(SCHEDS) + 2),
    ]
    for row in rows:
        sch = row["schedulers"]
        if row["case"] == "echelon-example":
            continue
        jobs = sch["fair"]["iteration_s"]  # the JSON sorts keys: dp, pp, tp, fsdp order
        for job in sorted(jobs, key=lambda j: JOBS.index(j) if j in JOBS else len(JOBS)):
            vals = [sch[s]["iteration_s"][job] for s in SCHEDS]
            ratio = vals[0] / vals[2]
            out.append(
                f"| {row['case']} | {job} | {_ms(row['network_free_iteration_s'][job])} | "
                + " | ".join(_ms(v) for v in vals)
                + f" | {ratio:.2f}x |"
            )
    return out


def _example(rows: list[dict[str, Any]]) -> list[str]:
    row = next(r for r in rows if r["case"] == "echelon-example")
    out = [
        "| scheduler | flow finish times (s) | next stage's forward done (s) |",
        "|---|---|---:|",
    ]
    for s in SCHEDS:
        d = row["schedulers"][s]
        out.append(
            f"| {s} | {', '.join(f'{x:g}' for x in d['flow_finish_s'])} | {d['stage2_done_s']:g} |"
        )
    return out


def _lina(rows: list[dict[str, Any]]) -> list[str]:
    out = [
        "| model | NIC | no network | fair (25 MB buckets) | coflow | echelon | "
        "Lina, 25 MB | Lina, best chunk | fair / Lina best | Lina paper |",
        "|---|---:|" + "---:|" * 8,
    ]
    for r in rows:
        chunks = r["lina_chunks_s"]
        best = min(chunks, key=lambda c: chunks[c])
        st = r["step_s"]
        out.append(
            f"| {r['model']} | {r['nic_gbps']:g} Gb/s | {_ms(r['network_free_step_s'])} | "
            f"{_ms(st['fair'])} | {_ms(st['coflow'])} | {_ms(st['echelon'])} | "
            f"{_ms(st['lina'])} | {_ms(chunks[best])} ({best} MB) | "
            f"{r['lina_best_speedup_vs_fair']:.2f}x | {LINA_PAPER}x |"
        )
    out += ["", "Lina's chunk sweep (step time, ms):", ""]
    sizes = sorted(rows[0]["lina_chunks_s"], key=float) if rows else []
    out.append("| model | NIC | " + " | ".join(f"{c} MB" for c in sizes) + " |")
    out.append("|---|---:|" + "---:|" * len(sizes))
    for r in rows:
        vals = " | ".join(_ms(r["lina_chunks_s"][c]) for c in sizes)
        out.append(f"| {r['model']} | {r['nic_gbps']:g} Gb/s | {vals} |")
    return out


def _sim(runs: list[dict[str, Any]]) -> list[str]:
    out = []
    for sim in runs:
        out += [
            f"{sim['trace']}, first {sim['max_jobs']} jobs ({sim['multi_gpu_jobs']} multi-GPU), "
            f"{sim['policy']}, {sim['cluster']} with {sim['gpus_per_node']} GPU(s) per server, "
            f"`--network {sim['network']}`:",
            "",
            "| run | avg JCT (h) | median JCT (h) | p95 JCT (h) | makespan (h) | core steps "
            "| wall (s) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for label in sorted(sim["runs"], key=lambda k: RUNS.index(k) if k in RUNS else 9):
            r = sim["runs"][label]
            out.append(
                f"| {label} | {r['avg_jct_s'] / 3600:.2f} | {r['median_jct_s'] / 3600:.2f} | "
                f"{r['p95_jct_s'] / 3600:.2f} | {r['makespan_s'] / 3600:.1f} | "
                f"{r['core_steps']} | {r['wall_s']:.1f} |"
            )
        ratio = sim["wall_per_step_ratio"]
        out += [
            "",
            f"avg JCT consolidate / ring: {sim['ring_vs_consolidate_avg_jct']:.3f}x; "
            f"wall time per core step vs communication-free: "
            f"{ratio['consolidate_vs_free']:.2f}x (network model), "
            f"{ratio['ring_vs_free']:.2f}x (network model + ring placer)",
            "",
        ]
    return out


def markdown(result: dict[str, Any]) -> str:
    parts = [
        "### EchelonFlow's pipeline example",
        "",
        *_example(result["flow_patterns"]),
        "",
        "### Iteration time per job (ms)",
        "",
        *_patterns(result["flow_patterns"]),
        "",
        "### MoE step time (ms): Lina's prioritisation",
        "",
        *_lina(result["lina"]),
        "",
    ]
    if result.get("sim"):
        parts += [
            "### Trace simulation: ring-aware placement vs consolidation",
            "",
            *_sim(result["sim"]),
        ]
    return "\n".join(parts) + "\n"


# One function per table of docs/network.md, for the docs-table registry
# (benchmarks/docs_tables.py): each renders one block between its markers.


def example_table(result: dict[str, Any]) -> str:
    return "\n".join(_example(result["flow_patterns"]))


def patterns_table(result: dict[str, Any]) -> str:
    """Iteration time per job, then the mean over the shared case's jobs per scheduler."""
    shared = next(r for r in result["flow_patterns"] if r["case"] == "shared")
    means = []
    for s in SCHEDS:
        it = shared["schedulers"][s]["iteration_s"]
        means.append(f"{s} {_ms(sum(it.values()) / len(it))}")
    n = len(shared["schedulers"]["fair"]["iteration_s"])
    return "\n".join(
        [*_patterns(result["flow_patterns"]), "", f"Mean over the {n} shared jobs: "
         + ", ".join(means) + " ms."]
    )  # fmt: skip


def lina_table(result: dict[str, Any]) -> str:
    lines = _lina(result["lina"])
    return "\n".join(lines[: lines.index("")])


def chunks_table(result: dict[str, Any]) -> str:
    lines = _lina(result["lina"])
    return "\n".join(lines[lines.index("") + 3 :])


def sim_tables(result: dict[str, Any]) -> str:
    """Each trace-simulation setting: its line, then free / consolidate / ring."""
    out: list[str] = []
    for sim in result["sim"]:
        g = sim["gpus_per_node"]
        out += [
            f"{sim['policy']}, {g} GPU{'s' if g > 1 else ''} per server, "
            f"`--network {sim['network']}`:",
            "",
            *_sim([sim])[2:-3],
            "",
        ]
    return "\n".join(out[:-1])


def wall_ratio_table(result: dict[str, Any]) -> str:
    """Wall time per core step against the communication-free run (indented: the doc
    shows it inside a list item)."""
    out = [
        "| setting | network model | network model + ring placer |",
        "|---|---:|---:|",
    ]
    for sim in result["sim"]:
        g, r = sim["gpus_per_node"], sim["wall_per_step_ratio"]
        out.append(
            f"| {sim['policy']}, {g} GPU{'s' if g > 1 else ''}/server "
            f"| {r['consolidate_vs_free']:.2f}x | {r['ring_vs_free']:.2f}x |"
        )
    return "\n".join("  " + line for line in out)
