"""Tables of measured numbers in ``docs/``, each rendered from its results JSON.

Why one registry: a number typed into a doc drifts from the run that produced it. Each
table here lives in its doc between ``<!-- NAME -->`` and ``<!-- /NAME -->`` markers and is
rewritten from ``benchmarks/results/*.json`` by its ``render`` function;
``tests/unit/test_docs_tables.py`` fails when a doc no longer equals its rendering.

Rewrite every table: ``.venv/bin/python -m benchmarks.docs_tables``.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Table:
    marker: str
    """``<!-- marker -->`` ... ``<!-- /marker -->`` in the doc."""
    doc: str
    """The doc, relative to the repository root."""
    results: str
    """The results JSON, relative to the repository root."""
    render: str
    """``module:function`` taking the parsed JSON and returning the table's markdown."""

    def rendered(self) -> str:
        mod, fn = self.render.split(":")
        data: Any = json.loads((ROOT / self.results).read_text())
        text: str = getattr(importlib.import_module(mod), fn)(data)
        return text.strip("\n")

    def current(self) -> str | None:
        """The text between the doc's markers, or None when the markers are missing."""
        m = _pattern(self.marker).search((ROOT / self.doc).read_text())
        return None if m is None else m.group(2).strip("\n")

    def write(self) -> bool:
        """Put the rendering between the markers; True if the doc changed."""
        path = ROOT / self.doc
        text = path.read_text()
        new, n = _pattern(self.marker).subn(
            lambda m: f"{m.group(1)}\n{self.rendered()}\n{m.group(3)}", text
        )
        if n != 1:
            raise SystemExit(f"{self.doc}: expected one <!-- {self.marker} --> block, found {n}")
        if new != text:
            path.write_text(new)
        return new != text


def _pattern(marker: str) -> re.Pattern[str]:
    m = re.escape(marker)
    # the closing marker keeps its indentation (a table inside a list item)
    return re.compile(rf"(<!-- {m} -->)(.*?)([ \t]*<!-- /{m} -->)", re.S)


TABLES: tuple[Table, ...] = (
    Table(
        "suite-runs",
        "docs/testing.md",
        "benchmarks/results/suite_times.json",
        "benchmarks._suite_table:runs",
    ),
    Table(
        "suite-tiers",
        "docs/testing.md",
        "benchmarks/results/suite_times.json",
        "benchmarks._suite_table:tiers",
    ),
    Table(
        "h200-catalogue",
        "docs/profiling.md",
        "lyra_ray/model/data/h200_throughputs.json",
        "benchmarks._profiling_tables:h200_table",
    ),
    Table(
        "interference-cv",
        "docs/profiling.md",
        "benchmarks/results/interference_cv.json",
        "benchmarks._profiling_tables:interference_table",
    ),
    Table(
        "packing-h200",
        "docs/gavel.md",
        "benchmarks/results/packing_h200.json",
        "benchmarks._packing_table:render",
    ),
    Table(
        "packing-pairs",
        "docs/gavel.md",
        "benchmarks/results/packing_pairs.json",
        "benchmarks._packing_pairs_table:render",
    ),
    Table(
        "moe-cost-gain",
        "docs/moe.md",
        "benchmarks/results/moe_cost_gain.json",
        "benchmarks._moe_cost_table:render",
    ),
    Table(
        "resize-phases",
        "docs/runtime.md",
        "benchmarks/results/resize_phases.json",
        "benchmarks._resize_table:render",
    ),
    Table(
        "gpu-warm-restart",
        "docs/runtime.md",
        "benchmarks/results/gpu_warm_restart.json",
        "benchmarks._resize_table:gpu_warm_restart",
    ),
    Table(
        "lyra-eval-summary",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval.json",
        "benchmarks._lyra_report:summary_table",
    ),
    Table(
        "lyra-eval-goals",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval.json",
        "benchmarks._lyra_report:goals_table",
    ),
    Table(
        "gavel-table",
        "docs/gavel.md",
        "benchmarks/results/gavel_table.json",
        "benchmarks.gavel_table:markdown",
    ),
    Table(
        "gavel-fidelity",
        "docs/gavel.md",
        "benchmarks/results/gavel_fidelity.json",
        "benchmarks.gavel_fidelity:markdown",
    ),
    Table(
        "chaos-table",
        "docs/reliability.md",
        "benchmarks/results/chaos.json",
        "benchmarks._chaos_table:render",
    ),
    Table(
        "chaos-serving",
        "docs/reliability.md",
        "benchmarks/results/chaos.json",
        "benchmarks._chaos_serving_table:render",
    ),
    Table(
        "head-recovery",
        "docs/reliability.md",
        "benchmarks/results/head_recovery.json",
        "benchmarks._head_recovery_table:render",
    ),
    Table(
        "scale-cycle",
        "docs/reliability.md",
        "benchmarks/results/scale.json",
        "benchmarks._scale_table:render",
    ),
    Table(
        "planner-fit",
        "docs/planner.md",
        "benchmarks/results/planner_fit.json",
        "benchmarks._planner_fit_table:render",
    ),
    Table(
        "runtime-backfill",
        "docs/runtime.md",
        "benchmarks/results/backfill.json",
        "benchmarks.backfill:render",
    ),
    Table(
        "network-example",
        "docs/network.md",
        "benchmarks/results/network.json",
        "benchmarks._network_report:example_table",
    ),
    Table(
        "network-patterns",
        "docs/network.md",
        "benchmarks/results/network.json",
        "benchmarks._network_report:patterns_table",
    ),
    Table(
        "network-lina",
        "docs/network.md",
        "benchmarks/results/network.json",
        "benchmarks._network_report:lina_table",
    ),
    Table(
        "network-lina-chunks",
        "docs/network.md",
        "benchmarks/results/network.json",
        "benchmarks._network_report:chunks_table",
    ),
    Table(
        "network-sim",
        "docs/network.md",
        "benchmarks/results/network.json",
        "benchmarks._network_report:sim_tables",
    ),
    Table(
        "network-sim-cost",
        "docs/network.md",
        "benchmarks/results/network.json",
        "benchmarks._network_report:wall_ratio_table",
    ),
    Table(
        "lyra-ablation",
        "docs/lyra.md",
        "benchmarks/results/lyra_ablation.json",
        "benchmarks._lyra_report:ablation_table",
    ),
    Table(
        "lyra-eval-prose",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval.json",
        "benchmarks._lyra_prose:pollux_goals",
    ),
    Table(
        "lyra-eval-held-out",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval.json",
        "benchmarks._lyra_prose:held_out",
    ),
    Table(
        "lyra-philly-prose",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval_philly.json",
        "benchmarks._lyra_prose:philly",
    ),
    Table(
        "lyra-ablation-prose",
        "docs/lyra.md",
        "benchmarks/results/lyra_ablation.json",
        "benchmarks._lyra_prose:ablation",
    ),
    Table(
        "lyra-sensitivity-prose",
        "docs/lyra.md",
        "benchmarks/results/lyra_ablation.json",
        "benchmarks._lyra_prose:sensitivity",
    ),
    Table(
        "lyra-sensitivity",
        "docs/lyra.md",
        "benchmarks/results/lyra_ablation.json",
        "benchmarks._lyra_report:sensitivity_table",
    ),
    Table(
        "lyra-noise",
        "docs/lyra.md",
        "benchmarks/results/lyra_ablation.json",
        "benchmarks._lyra_report:noise_line",
    ),
    Table(
        "lyra-grid",
        "docs/lyra.md",
        "benchmarks/results/lyra_ablation.json",
        "benchmarks._lyra_report:grid_table",
    ),
    Table(
        "checkpoint-io",
        "docs/runtime.md",
        "benchmarks/results/checkpoint_io.json",
        "benchmarks._docs_renders:checkpoint_io",
    ),
    Table(
        "policy-solve",
        "docs/gavel.md",
        "benchmarks/results/policy_solve.json",
        "benchmarks._docs_renders:policy_solve",
    ),
    Table(
        "planner-speed",
        "docs/planner.md",
        "benchmarks/results/planner_speed.json",
        "benchmarks._docs_renders:planner_speed",
    ),
    Table(
        "moe-plan",
        "docs/moe.md",
        "benchmarks/results/moe_plan.json",
        "benchmarks._docs_renders:moe_plan",
    ),
    Table(
        "moe-serving",
        "docs/moe.md",
        "benchmarks/results/moe_serving.json",
        "benchmarks._docs_renders:moe_serving",
    ),
    Table(
        "moe-expert-fit",
        "docs/moe.md",
        "benchmarks/results/moe_expert_fit.json",
        "benchmarks._docs_renders:moe_expert_fit",
    ),
    Table(
        "moe-path-estimation",
        "docs/moe.md",
        "benchmarks/results/moe_path_estimation.json",
        "benchmarks.moe_path_estimation:render",
    ),
    Table(
        "live-overhead",
        "docs/observability.md",
        "benchmarks/results/live_overhead.json",
        "benchmarks._docs_renders:live_overhead",
    ),
    Table(
        "sim-speed",
        "docs/gavel.md",
        "benchmarks/results/sim_speed.json",
        "benchmarks.sim_speed:render",
    ),
    Table(
        "sim-speed-interpreters",
        "docs/gavel.md",
        "benchmarks/results/sim_speed_interpreters.json",
        "benchmarks._docs_renders:sim_speed_interpreters",
    ),
    Table(
        "planner-ptdp",
        "docs/planner.md",
        "benchmarks/results/planner_ptdp.json",
        "benchmarks.planner_ptdp:render_table1",
    ),
    Table(
        "planner-fig13",
        "docs/planner.md",
        "benchmarks/results/planner_ptdp.json",
        "benchmarks.planner_ptdp:render_fig13",
    ),
    Table(
        "planner-pipeline",
        "docs/planner.md",
        "benchmarks/results/planner_pipeline.json",
        "benchmarks.planner_pipeline:render",
    ),
    Table(
        "loaning",
        "docs/loaning.md",
        "benchmarks/results/live_loaning.json",
        "benchmarks._docs_renders:live_loaning",
    ),
    Table(
        "lyra-eval-runs",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval.json",
        "benchmarks._lyra_report:pairs_table",
    ),
    Table(
        "lyra-eval-workloads",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval.json",
        "benchmarks._lyra_report:workloads_table",
    ),
    Table(
        "lyra-philly-summary",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval_philly.json",
        "benchmarks._lyra_report:summary_table",
    ),
    Table(
        "lyra-philly-goals",
        "docs/lyra.md",
        "benchmarks/results/lyra_eval_philly.json",
        "benchmarks._lyra_report:goals_table",
    ),
    Table(
        "loaning-2026-11-23",
        "docs/loaning.md",
        "benchmarks/results/live_loaning_2026-11-23.json",
        "benchmarks._docs_renders:live_loaning",
    ),
    Table(
        "teams-eval",
        "docs/teams.md",
        "benchmarks/results/teams_eval.json",
        "benchmarks._teams_table:render",
    ),
    Table(
        "teams-hetero",
        "docs/teams.md",
        "benchmarks/results/teams_hetero.json",
        "benchmarks._teams_hetero_table:render",
    ),
)
"""Every rendered table. Add a row when a doc gains one."""


def table(marker: str) -> Table:
    """The registered table with this marker (a benchmark that writes its JSON then
    rewrites its doc's table through this)."""
    return next(t for t in TABLES if t.marker == marker)


def main() -> int:
    import argparse

    argparse.ArgumentParser(
        description="Rewrite every registered docs table from its JSON."
    ).parse_args()
    for t in TABLES:
        if t.write():
            sys.stderr.write(f"updated {t.doc} <!-- {t.marker} -->\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
