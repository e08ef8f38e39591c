"""The tables of ``docs/profiling.md``, rendered by ``benchmarks/docs_tables.py``.

* :func:`h200_table` from ``lyra_ray/model/data/h200_throughputs.json``: the measured
  H200 catalogue, alone steps/s and the share each job keeps beside each partner;
* :func:`interference_table` from ``benchmarks/results/interference_cv.json``
  (``benchmarks/interference_cv.py``): how well pairs nobody measured are predicted.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

from lyra_ray.model.interference import EXTRA_KEYS, observed_shares

ABBREV = {
    "recommendation": "rec",
    "transformer": "tfm",
    "cyclegan": "cgan",
    "resnet18": "rn18",
    "resnet50": "rn50",
}
"""Column heads short enough for eight partners in ~100 columns."""


def _name(key: str) -> str:
    """``"('resnet50', 1)"`` -> ``resnet50`` (``resnet50 x2`` at another scale)."""
    try:
        name, sf = ast.literal_eval(key)
    except (ValueError, SyntaxError, TypeError):
        return key
    return str(name) if int(sf) == 1 else f"{name} x{sf}"


def _short(key: str) -> str:
    name = _name(key)
    return ABBREV.get(name, name[:6])


def h200_table(data: dict[str, Any]) -> str:
    """Alone steps/s (with the warm windows' spread) and the share kept beside each
    partner (pair rate / alone rate, 2 decimals; a self-pair: the mean of its two
    sides), one table per GPU type of the file. Predicted entries are left out."""
    predicted = {(str(p[1]), str(p[2])) for p in data.get("predicted", [])}
    out: list[str] = []
    for gpu, table in data.items():
        if gpu in EXTRA_KEYS or gpu.endswith("_unconsolidated"):
            continue
        jobs = sorted(table, key=_name)
        shares = observed_shares(table, predicted)
        spread = data.get("spread", {}).get(gpu, {})
        head = ["job", "alone steps/s (spread)", *(_short(j) for j in jobs)]
        out.append("| " + " | ".join(head) + " |")
        out.append("|---|---:|" + "---:|" * len(jobs))
        for i in jobs:
            alone = float(table[i]["null"])
            s = spread.get(i, {}).get("null")
            rate = f"{alone:.1f}" + (f" ({100 * float(s):.0f} %)" if s is not None else "")
            cells = [f"{shares[(i, j)]:.2f}" if (i, j) in shares else "–" for j in jobs]
            out.append(f"| {_name(i)} | {rate} | " + " | ".join(cells) + " |")
        out.append("")
        legend = ", ".join(
            f"{ABBREV[n]} = {n}" for n in sorted(ABBREV) if any(_name(j) == n for j in jobs)
        )
        out.append(
            _wrap(
                f"{gpu}: share = steps/s of the row's job beside the column's partner / its "
                f"steps/s alone; spread = (max - min) / median of the warm windows alone. "
                + (f"{legend}." if legend else "")
            )
        )
    return "\n".join(out)


def interference_table(data: dict[str, Any]) -> str:
    """MAE of the share kept on hidden pairs, per method, under both fold schemes."""
    s = data["schemes"]
    lo, kf = s["leave_one_pair_out"], s["kfold"]
    n_seeds = kf["seeds"][1] - kf["seeds"][0] + 1
    rows = [
        f"| method | leave-one-pair-out | {kf['folds']}-fold x {n_seeds} seeds (range) "
        "| leave-one-pair-out, targets <= 1 |",
        "|---|---:|---:|---:|",
    ]
    for name, m in lo["methods"].items():
        k = kf["methods"][name]
        rows.append(
            f"| {name} | {m['mae']:.4f} | {k['mae']:.4f} ({k['spread']['min']:.3f}–"
            f"{k['spread']['max']:.3f}) | {m['mae_vs_clipped_targets']:.4f} |"
        )
    rows.append("")
    rows.append(
        _wrap(
            f"MAE of the share kept on hidden pairs, {data['gpu']}: {data['jobs']} jobs, "
            f"{data['pairs']} pairs ({lo['folds']} leave-one-pair-out folds), "
            f"{data['shares']} shares, {data['shares_above_1']} of them above 1 by noise. "
            "A fold hides both sides of its pairs; targets are the measured shares as they "
            "are (last column: clipped to 1); range: the lowest and highest MAE of the "
            f"{n_seeds} repeats. From `{data['command']}`."
        )
    )
    return "\n".join(rows)


def _wrap(text: str) -> str:
    return "\n".join(textwrap.wrap(text, 92, break_on_hyphens=False, break_long_words=False))
