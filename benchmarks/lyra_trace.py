"""Why one run's jobs queue differently under Lyra and under Basic, decision by decision.

``benchmarks/lyra_eval.py`` reports a run's means; when Lyra queues longer than Basic on a
run (docs/lyra.md, "Against the goals"), the means do not say which jobs waited longer
or what held their GPUs. This replays one Pollux run (workload, seed) under both, then
prints the jobs whose queuing differs most, and every allocation the two policies made
in a window of simulated time around the job that lost most (or ``--window``): which
jobs ran where (``a100x8``: eight A100s; ``+t4x2``: flexible workers on another type),
how many servers were lent, and which jobs queued. Nothing is written::

    .venv/bin/python benchmarks/lyra_trace.py                      # workload-7, seed 1
    .venv/bin/python benchmarks/lyra_trace.py --workload 3 --seed 0 --window 20850:21350
    .venv/bin/python benchmarks/lyra_trace.py --lyra move_gain_s=null   # a Lyra variant
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _lyra_workloads as W
from benchmarks import lyra_eval as E
from lyra_ray.model import Allocation, ClusterSnapshot
from lyra_ray.model.elastic_range import DEFAULT_FRACTION
from lyra_ray.policies.base import get_policy

Decision = tuple[float, int, dict[str, str], list[str]]


def _short(job_id: str) -> str:
    """``000074-yolov3-74`` -> ``yolov3-74``."""
    return job_id.split("-", 1)[-1]


def _recorded(name: str, kwargs: dict[str, Any], case: W.Case) -> tuple[Any, list[Decision]]:
    """Run ``case`` under the policy, keeping every allocation it made."""
    try:
        policy = get_policy(name, **kwargs)
    except TypeError as e:  # an argument LyraPolicy does not take
        raise SystemExit(f"--lyra: {e}") from None
    decide = policy.allocate
    seen: list[Decision] = []

    def allocate(snap: ClusterSnapshot) -> Allocation:
        a = decide(snap)
        running = {
            _short(j): f"{t}x{w}" + "".join(f"+{x}x{k}" for x, k in a.extra.get(j, ()))
            for j, (t, w) in a.workers.items()
        }
        queued = [_short(j.id) for j in snap.active_jobs if j.id not in a.workers]
        seen.append((snap.now, len(a.lend), running, queued))
        return a

    policy.allocate = allocate  # type: ignore[method-assign]
    return E.simulate(policy, case), seen


def _lyra_args(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for p in pairs:
        key, sep, value = p.partition("=")
        if not sep or not key:
            raise SystemExit(f"--lyra {p!r}: expected KEY=VALUE (VALUE as JSON, e.g. null)")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            raise SystemExit(f"--lyra {p!r}: VALUE is not JSON (null, 3600, true, ...)") from None
    return out


def _window(text: str) -> tuple[float, float]:
    lo, sep, hi = text.partition(":")
    try:
        a, b = float(lo), float(hi)
    except ValueError:
        a = b = float("nan")
    if not sep or not a <= b:  # NaN fails too
        raise argparse.ArgumentTypeError(f"{text!r}: expected FROM:TO in seconds, FROM <= TO")
    return a, b


def _timeline(title: str, seen: list[Decision], lo: float, hi: float) -> list[str]:
    lines = [f"== {title}"]
    last = None
    for now, lent, running, queued in seen:
        if not lo <= now <= hi:
            continue
        key = (lent, sorted(running.items()), queued)
        if key == last:
            continue
        last = key
        body = " ".join(f"{j}:{p}" for j, p in sorted(running.items()))
        text = f"t={now:,.0f} lent={lent} run: {body} | queued: {' '.join(queued) or '-'}"
        lines += textwrap.wrap(text, 80, subsequent_indent="    ")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", type=int, default=7, choices=W.POLLUX_WORKLOADS)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--top", type=int, default=8, help="jobs shown at each end")
    ap.add_argument("--window", type=_window, help="FROM:TO, simulated seconds")
    ap.add_argument("--lyra", action="append", default=[], help="KEY=JSON, a Lyra argument")
    args = ap.parse_args()
    base = E.parser().parse_args(["--seeds", str(args.seed)])
    base.fraction = DEFAULT_FRACTION
    case = W.pollux_case(args.workload, args.seed, base)
    basic, basic_seen = _recorded("basic", {}, case)
    lyra, lyra_seen = _recorded("lyra", _lyra_args(args.lyra), case)
    by_b = {r["id"]: r for r in basic.jobs}
    rows = []
    for r in lyra.jobs:
        b = by_b[r["id"]]
        if r["queue_s"] is not None and b["queue_s"] is not None:
            rows.append((r["queue_s"] - b["queue_s"], r, b))
    rows.sort(key=lambda x: x[0])
    n = len(rows)
    total = sum(d for d, _, _ in rows)
    print(f"{case.key}: Lyra queues {total / n:+,.1f} s a job against Basic ({n} jobs)")
    print(f"{'job':<22} {'arrival':>9} {'Lyra':>8} {'Basic':>8} {'diff':>8}  queuing (s)")
    shown = rows[: args.top] + rows[max(args.top, n - args.top) :]
    for d, r, b in shown:
        print(
            f"{_short(r['id'])[:22]:<22} {r['arrival_s']:>9,.0f} {r['queue_s']:>8,.0f} "
            f"{b['queue_s']:>8,.0f} {d:>+8,.0f}"
        )
    if args.window is not None:
        lo, hi = args.window
    elif rows:
        worst = rows[-1][1]
        lo, hi = worst["arrival_s"] - 60.0, worst["arrival_s"] + worst["queue_s"] + 60.0
    else:
        lo = hi = 0.0
    print()
    for line in _timeline("Basic", basic_seen, lo, hi) + _timeline("Lyra", lyra_seen, lo, hi):
        print(line)
    print(f"\nwindow {lo:,.0f}-{hi:,.0f} s of {case.key}; nothing written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
