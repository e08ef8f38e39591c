"""What perfect foresight of serving would buy Lyra on the Philly windows (simulator only).

Lyra misses the 5 % preemption goal on nearly every Philly pair (docs/lyra.md): jobs
start on lent servers and are preempted when serving takes them back. Its guard is a
fixed rule (``loan_max_remaining_s``: no job expected to run longer than 4 h starts on a
loaned server). Would a forecast of serving demand do better? This benchmark bounds the
answer: an *oracle* Lyra that knows the serving day ahead and lets a job start on a lent
server only if it is expected to finish before serving next needs a server that is lent
now. No forecast can beat that at avoiding reclaim preemptions; if even the oracle
queues longer than Basic, the three goals conflict on this workload, and a forecast
would only move Lyra along the trade-off, not past it.

The oracle (``benchmarks/_loan_oracle.py``) is Lyra with its defaults but for that one
rule; it runs on the same cases (``lyra_eval.py --philly``'s: seven windows, seeds 0
and 1) beside Basic and Lyra, in one process.

    .venv/bin/python benchmarks/lyra_loan_oracle.py      # 14 pairs, ~6 min
    .venv/bin/python -m benchmarks.docs_tables           # docs/lyra.md's table
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _lyra_workloads as W
from benchmarks import lyra_eval as E
from benchmarks._loan_oracle import OracleLyra
from lyra_ray.model.elastic_range import DEFAULT_FRACTION
from lyra_ray.model.restart_cost import RESTART_S
from lyra_ray.policies.base import Policy, get_policy

log = logging.getLogger("lyra_loan_oracle")
OUT = E.ROOT / "benchmarks/results/lyra_loan_oracle.json"
KEYS = ("avg_queue_s", "avg_jct_s", "preemption_ratio", "preemptions", "reclaim_preemptions")


def run(policy: Policy, case: W.Case) -> dict[str, Any]:
    summary = E.simulate(policy, case).summary
    return {k: summary[k] for k in KEYS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=E._ints, default=list(W.PHILLY_WINDOWS))
    ap.add_argument("--seeds", type=E._ints, default=[0, 1])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    base = E.parser().parse_args([])
    base.fraction = DEFAULT_FRACTION
    base.cluster_id = "6214e9"
    philly = W.shared_data() / "pollux" / "philly.csv"
    pairs: dict[str, dict[str, Any]] = {}
    cases = [(w, s) for w in args.windows for s in args.seeds]
    for i, (w, s) in enumerate(cases, 1):
        case = W.philly_case(philly, w, s, base, W.TUNED_PHILLY)
        pairs[case.key] = {
            "basic": run(get_policy("basic"), case),
            "lyra": run(get_policy("lyra"), case),
            "oracle": run(OracleLyra(case.demand), case),
        }
        log.warning("%s done (%d of %d)", case.key, i, len(cases))  # progress on long runs
    doc = {
        "command": "benchmarks/lyra_loan_oracle.py",
        "restart_s": RESTART_S,
        "cases": "lyra_eval.py --philly's: Philly cluster 6214e9, 1,000 jobs per window",
        "pairs": pairs,
    }
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
