"""Why Lyra queued more than Basic, part by part, and how far its defaults carry.

On the runs of ``benchmarks/lyra_eval.py`` (every Pollux workload x seeds 0-2 in its
default regime, and the 14 Philly pairs), Basic and Lyra with one part changed at a
time (:data:`VARIANTS`): the reserve held back, ``loan_max_remaining_s`` (the 4-h
rule), ``lend_after_s``, phase 2's valuation (greedy instead of the knapsack), naive
instead of knapsack reclaim, cross-type workers, the restart model (a flat ``RESTART_S``), the
move to faster GPUs, and Lyra as it was evaluated before #44. Per variant: the runs on
which it meets the issue's goals against Basic (mean queuing and mean JCT no greater,
a 1 % tie counting; preempted at most 5 %), and the geometric mean over runs of its
mean queuing and mean JCT over Basic's.

``--jitter`` runs Lyra and Basic on each Pollux run and on ten copies of it with every
arrival up to a minute later (``benchmarks/_lyra_jitter.py``): whether a run Lyra misses
is a miss of the policy or of where its arrivals fall.
``--sensitivity`` runs Lyra and Basic on the held-out seeds 3-5 and on three other pool
sizes (docs/lyra.md, "How far it carries"); ``--noise`` runs Basic against itself with
every arrival moved by up to a minute (uniform, seeded), which is how much a run's means
move when nothing but timing changes. Writes ``benchmarks/results/lyra_ablation.json``::

    .venv/bin/python benchmarks/lyra_ablation.py                 # ~40 min here
    .venv/bin/python benchmarks/lyra_ablation.py --sensitivity   # ~3 min
    .venv/bin/python benchmarks/lyra_ablation.py --noise         # ~1 min
    .venv/bin/python benchmarks/lyra_ablation.py --jitter        # ~3 min
    .venv/bin/python benchmarks/lyra_ablation.py --pollux-only   # ~5 min, Philly kept
    .venv/bin/python benchmarks/lyra_ablation.py --grid          # ~4 min
    .venv/bin/python benchmarks/lyra_ablation.py --loan-grid     # ~1 min
    .venv/bin/python benchmarks/lyra_ablation.py --only NAME     # one new row, ~10 min

``--grid`` re-chooses ``lend_after_s`` x ``move_gain_s`` the way the defaults were chosen,
on the Pollux runs that chose them (workloads 1, 2, 6), and runs every pair on all 24
runs beside it: whether a choice made on the tuning runs carries to the held-out ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import random
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _lyra_workloads as W
from benchmarks import lyra_eval as E
from benchmarks._lyra_jitter import run_jitter
from benchmarks._lyra_report import PREEMPT_LIMIT, TIE
from lyra_ray.model.elastic_range import DEFAULT_FRACTION
from lyra_ray.model.restart_cost import RESTART_S

log = logging.getLogger("lyra_ablation")
BEFORE = {"reserve_fraction": 0.0, "lend_after_s": 1800.0, "move_gain_s": None}
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "lyra": ("Lyra (defaults)", {}),
    "reserve": ("a reserve of 10 % of the pool (the former default)", {"reserve_fraction": 0.1}),
    "no-4h": ("no 4-h rule (`loan_max_remaining_s=None`)", {"loan_max_remaining_s": None}),
    "loan-1h": (
        "a 1-h rule (`loan_max_remaining_s=3600`)",
        {"loan_max_remaining_s": 3600.0},
    ),
    "lend-10m": (
        "lends after 10 min (`lend_after_s=600`, the former default)",
        {"lend_after_s": 600.0},
    ),
    "lend-30m": ("lends after 30 min (`lend_after_s=1800`)", {"lend_after_s": 1800.0}),
    "greedy": ("phase 2 greedy, not the knapsack", {"flexible": "greedy"}),
    "naive": ("naive reclaim, not the knapsack", {"reclaim": "naive"}),
    "one-type": ("no cross-type workers", {"mixed_types": False}),
    "flat-price": (f"a flat {RESTART_S:g} s restart price", {"resize_cost_s": RESTART_S}),
    "no-move": ("no move to faster GPUs", {"move_gain_s": None}),
    "move-holds": (
        "moves hold for a waiting job (`move_holds_back=True`)",
        {"move_holds_back": True},
    ),
    "finish-first-rigid": (
        "a rigid job waits for a faster type when it finishes sooner (`finish_first='rigid'`)",
        {"finish_first": "rigid"},
    ),
    "finish-first": (
        "any queued job waits for a faster type when it finishes sooner (`finish_first='all'`)",
        {"finish_first": "all"},
    ),
    "before": (
        f"Lyra as evaluated before #44 (a flat {RESTART_S:g} s price)",
        {**BEFORE, "resize_cost_s": RESTART_S},
    ),
}
ALTERNATIVES: dict[str, tuple[str, dict[str, Any], tuple[str, ...] | None]] = {
    "former_move_gain": (
        "the former `move_gain_s=3600`",
        {"move_gain_s": 3600.0},
        ("default",),
    ),
    "loan_1h": ("a 1-h loan rule", {"loan_max_remaining_s": 3600.0}, None),
    "lend_10m": ("the former `lend_after_s=600`", {"lend_after_s": 600.0}, None),
    "finish_first_rigid": ("`finish_first='rigid'`", {"finish_first": "rigid"}, None),
}
"""What ``--sensitivity`` runs beside the defaults: (label, Lyra's arguments, the regimes
it runs in; ``None``: all). The ``move_gain_s`` in force before the restart price fell
from 8.3 to 5.2 s (whether a change on the held-out seeds is the price's or the
re-chosen threshold's), the loan rule that the tuning runs would pick (whether it
carries to other seeds and pools), and the former 10-min lend delay (whether lending at
once, re-chosen on the tuning runs, carries)."""
LARGE, MID = "language-m-large", "language-m-mid"
REGIMES = {
    "default": (W.POLLUX_CLUSTER["train"], W.POLLUX_CLUSTER["infer"], W.SERVING),
    "16 T4 servers": ("a100=4x8", "t4=16x4", ((LARGE, 80.0), (MID, 500.0))),
    "12 T4 servers": ("a100=4x8", "t4=12x4", ((LARGE, 120.0), (MID, 750.0))),
    "48 A100": ("a100=6x8", "t4=8x4", W.SERVING),
}
"""The default regime (held-out seeds) and three other pools, each inference pool
sized, as the default is, for the two models' 14-day peaks."""


def verdict(lyra: dict[str, Any], basic: dict[str, Any]) -> dict[str, Any]:
    """The issue's goals on one run (a 1 % tie counts)."""
    q = lyra["avg_queue_s"] <= TIE * basic["avg_queue_s"] + 1e-9
    j = lyra["avg_jct_s"] <= TIE * basic["avg_jct_s"] + 1e-9
    p = lyra["preemption_ratio"] <= PREEMPT_LIMIT
    return {"queue": q, "jct": j, "preempted": p, "all": q and j and p}


def tally(pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """Runs meeting each goal, and the geometric means over runs of Lyra / Basic (queuing
    with 60 s added to both, so that near-empty queues do not dominate)."""
    v = [verdict(a, b) for a, b in pairs]
    n = len(pairs)

    def geo(key: str, add: float = 0.0) -> float:
        return math.exp(sum(math.log((a[key] + add) / (b[key] + add)) for a, b in pairs) / n)

    return {
        "runs": n,
        "all": sum(x["all"] for x in v),
        "queue": sum(x["queue"] for x in v),
        "jct": sum(x["jct"] for x in v),
        "preempted": sum(x["preempted"] for x in v),
        "queue_geo": geo("avg_queue_s", 60.0),
        "jct_geo": geo("avg_jct_s"),
        "max_preempted": max(a["preemption_ratio"] for a, _ in pairs),
    }


def run_all(cases: list[W.Case], variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    scen = {"basic": ("basic", {}, False, False)}
    scen.update({k: ("lyra", kw, False, False) for k, kw in variants.items()})
    per: dict[str, dict[str, Any]] = {}
    for i, case in enumerate(cases, 1):
        per[case.key] = {k: E.run(k, case, scen) for k in scen}
        log.warning("%s done (%d of %d)", case.key, i, len(cases))  # progress on long runs
    out = {k: tally([(per[c][k], per[c]["basic"]) for c in per]) for k in variants}
    return {"variants": out, "runs": per}


def noise(base: argparse.Namespace, jitter_s: float = 60.0) -> dict[str, Any]:
    """Basic against Basic with each arrival later by U(0, ``jitter_s``) (seed 1)."""
    scen = {"basic": ("basic", {}, False, False)}
    rows: dict[str, Any] = {}
    for w in W.POLLUX_WORKLOADS:
        for s in (0, 1, 2):
            case = W.pollux_case(w, s, base)
            a = E.run("basic", case, scen)
            rnd = random.Random(1)
            case.specs = [
                dataclasses.replace(j, arrival_s=j.arrival_s + rnd.uniform(0.0, jitter_s))
                for j in case.specs
            ]
            b = E.run("basic", case, scen)
            rows[case.key] = {
                "queue": b["avg_queue_s"] / a["avg_queue_s"] if a["avg_queue_s"] > 0 else None,
                "jct": b["avg_jct_s"] / a["avg_jct_s"],
            }
    return {"jitter_s": jitter_s, "runs": rows}


GRID_LEND = (None, 300.0, 600.0, 1200.0, 1800.0)
GRID_MOVE = (None, 1800.0, 3600.0, 7200.0)


GRID_LOAN = (None, 1800.0, 3600.0, 7200.0, 14400.0)
"""``loan_max_remaining_s`` values of ``--loan-grid`` (the other settings their defaults)."""


def grid(base: argparse.Namespace) -> dict[str, Any]:
    """Each (lend_after_s, move_gain_s) pair on the tuning runs and on all 24."""
    return sweep(
        base,
        {
            f"lend={la},move={mg}": {"lend_after_s": la, "move_gain_s": mg}
            for la in GRID_LEND
            for mg in GRID_MOVE
        },
    )


def loan_grid(base: argparse.Namespace) -> dict[str, Any]:
    """Each ``loan_max_remaining_s`` of :data:`GRID_LOAN` on the tuning runs and all 24."""
    return sweep(base, {f"loan={v}": {"loan_max_remaining_s": v} for v in GRID_LOAN})


def sweep(base: argparse.Namespace, variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each variant on the tuning runs and, beside it, on all 24 Pollux runs."""
    cases = [W.pollux_case(w, s, base) for w in W.POLLUX_WORKLOADS for s in (0, 1, 2)]
    got = run_all(cases, variants)
    tuned = {c.key for c in cases if not c.held_out}
    rows = {}
    for k, kw in variants.items():
        pairs = [(got["runs"][c][k], got["runs"][c]["basic"]) for c in got["runs"]]
        in_tuned = [(a, b) for c, (a, b) in zip(got["runs"], pairs, strict=True) if c in tuned]
        rows[k] = {"args": kw, "tuning_runs": tally(in_tuned), "all_runs": tally(pairs)}
    return {"tuning_workloads": list(W.TUNED_POLLUX), "variants": rows}


def merged(
    doc: dict[str, Any], part: str, got: dict[str, Any], only: list[str] | None
) -> dict[str, Any]:
    """``got`` as the part's variants, or with ``--only`` merged into the stored ones.

    WHY the check: a row re-run alone is comparable with the stored rows only if the
    stored defaults were made by code and a price that decide alike, so the defaults run
    again beside it and must come out equal; else nothing is written (run it whole).
    """
    if not only:
        return got
    stored = doc.get(part, {})
    if doc.get("restart_s", {}).get(part) != RESTART_S or stored.get("lyra") != got["lyra"]:
        raise SystemExit(
            f"lyra_ablation.py --only: the stored {part} results were made by code or a "
            f"restart price that decides otherwise (the defaults' row differs: stored "
            f"{stored.get('lyra')}, now {got['lyra']}); nothing written: run the whole ablation"
        )
    return {**stored, **got}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sensitivity", action="store_true")
    ap.add_argument("--noise", action="store_true")
    ap.add_argument("--jitter", action="store_true", help="each run in jittered copies (~3 min)")
    ap.add_argument("--grid", action="store_true", help="lend_after_s x move_gain_s (~4 min)")
    ap.add_argument("--loan-grid", action="store_true", help="loan_max_remaining_s (~1 min)")
    ap.add_argument(
        "--pollux-only",
        action="store_true",
        help="rerun the Pollux runs only, keeping the stored Philly part (~35 of the 40 min)",
    )
    ap.add_argument(
        "--only",
        type=lambda v: [x for x in v.split(",") if x],
        default=None,
        metavar="NAME[,NAME]",
        help="run these variants (and the defaults, as a check) and merge them into the "
        "stored results, which must have been made by code that decides alike",
    )
    ap.add_argument("--out", type=Path, default=E.ROOT / "benchmarks/results/lyra_ablation.json")
    args = ap.parse_args()
    unknown = sorted(set(args.only or ()) - set(VARIANTS))
    if unknown:
        ap.error(f"--only: no variant named {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    logging.basicConfig(level=logging.WARNING)
    doc: dict[str, Any] = json.loads(args.out.read_text()) if args.out.is_file() else {}
    base = E.parser().parse_args([])
    base.fraction = DEFAULT_FRACTION
    if args.jitter:
        doc["jitter"] = run_jitter(base)
        doc.setdefault("restart_s", {})["jitter"] = RESTART_S
        args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.out}")
        return 0
    if args.grid or args.loan_grid:
        part = "grid" if args.grid else "loan_grid"
        doc[part] = grid(base) if args.grid else loan_grid(base)
        doc.setdefault("restart_s", {})[part] = RESTART_S
        args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.out}")
        return 0
    if args.noise:
        doc["noise"] = noise(base)
    elif args.sensitivity:
        sens: dict[str, Any] = {}
        seeds = {"default": (3, 4, 5)}
        for name, (train, infer, serving) in REGIMES.items():
            base.cluster, base.inference = train, infer
            old, W.SERVING = W.SERVING, serving
            try:
                cases = [
                    W.pollux_case(w, s, base)
                    for w in W.POLLUX_WORKLOADS
                    for s in seeds.get(name, (0, 1, 2))
                ]
                alts = {
                    k: kw
                    for k, (_, kw, where) in ALTERNATIVES.items()
                    if where is None or name in where
                }
                got = run_all(cases, {"lyra": {}} | alts)
            finally:
                W.SERVING = old
            sens[name] = {
                "cluster": train,
                "inference": infer,
                "serving": [f"{m}@{c:g}" for m, c in serving],
                "seeds": list(seeds.get(name, (0, 1, 2))),
                **got["variants"]["lyra"],
            }
            sens[name]["alternatives"] = {
                k: {"label": ALTERNATIVES[k][0], "args": kw, **got["variants"][k]}
                for k, kw in alts.items()
            }
            log.warning("%s: %s", name, sens[name])
        doc["sensitivity"] = sens
    else:
        variants = {k: kw for k, (_, kw) in VARIANTS.items() if not args.only or k in args.only}
        variants.setdefault("lyra", {})
        pollux = [W.pollux_case(w, s, base) for w in W.POLLUX_WORKLOADS for s in (0, 1, 2)]
        doc["pollux"] = merged(doc, "pollux", run_all(pollux, variants)["variants"], args.only)
        log.warning("pollux: %d runs of %d variants done", len(pollux), len(variants))
    if not (args.noise or args.sensitivity or args.pollux_only):
        base.cluster_id = "6214e9"
        philly = W.shared_data() / "pollux" / "philly.csv"
        cases = [
            W.philly_case(philly, w, s, base, W.TUNED_PHILLY)
            for w in W.PHILLY_WINDOWS
            for s in (0, 1)
        ]
        doc["philly"] = merged(doc, "philly", run_all(cases, variants)["variants"], args.only)
    if not (args.noise or args.sensitivity):
        doc["labels"] = {k: label for k, (label, _) in VARIANTS.items()}
        doc["order"] = list(VARIANTS)  # the JSON's keys are sorted
        doc["variants"] = {k: kw for k, (_, kw) in VARIANTS.items()}
    # Parts are refreshed separately, so each records the default restart price it ran with.
    price = doc.setdefault("restart_s", {})
    if args.noise:
        price["noise"] = RESTART_S
    elif args.sensitivity:
        price["sensitivity"] = RESTART_S
    else:
        price["pollux"] = RESTART_S
        if not args.pollux_only:
            price["philly"] = RESTART_S
    doc["command"] = "benchmarks/lyra_ablation.py"  # the full run; flags refresh parts
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
