"""Communication-aware scheduling: fair sharing, Coflow, EchelonFlow and Lina side by side.

Three parts, each on the same inputs for every scheduler (sizes in
``benchmarks/_network_cases.py`` and ``docs/network.md``):

1. EchelonFlow's pipeline example, then DP, PP, TP and FSDP steps and three jobs
   sharing an oversubscribed fabric: iteration time per job under each flow scheduler.
2. Lina's training side: an MoE step's all-to-alls against its gradient all-reduce,
   fair sharing with DDP's 25 MB buckets against strict all-to-all priority with the
   gradients cut into equal chunks (a sweep), for two model sizes and two NIC speeds.
3. The trace simulator with ring-aware placement against consolidation, on Gavel's
   multi-GPU trace with an oversubscribed spine; the same trace with communication free
   is the reference, and its wall time the baseline of the network model's cost.

Writes ``benchmarks/results/network.json`` and (``--markdown``) the tables of
``docs/network.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import _network_cases as cases  # noqa: E402
from lyra_ray.network.flowsim import FlowScheduler, simulate  # noqa: E402
from lyra_ray.network.lina import LinaScheduler  # noqa: E402
from lyra_ray.network.moe import MoEModel, moe_step  # noqa: E402
from lyra_ray.network.schedulers import CoflowScheduler, EchelonScheduler, FairSharing  # noqa: E402
from lyra_ray.network.topology import Topology, gbps  # noqa: E402

log = logging.getLogger("network")
SCHEDULERS: dict[str, FlowScheduler] = {
    "fair": FairSharing(),
    "coflow": CoflowScheduler(),
    "echelon": EchelonScheduler(),
    "lina": LinaScheduler(),
}
TRACE = ROOT.parent / "shared" / "data" / "gavel" / "traces"
TRACE = TRACE / "generated_continuous_multiple_seed0_lam1800_2000jobs.trace"
THROUGHPUTS = ROOT.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def _scaled(topo: Topology, k: float) -> Topology:
    """The same fabric ``k`` times faster: ``k = 1e6`` is the communication-free bound."""
    local = float(topo.capacity[topo.local(0)])
    return Topology(
        topo.servers, topo.rack_of, list(topo.nic_bps * k), topo.oversubscription, local * k
    )


def flow_patterns() -> list[dict[str, Any]]:
    out = []
    for case in [cases.echelon_example(), *cases.pattern_cases()]:
        free = simulate(case.tasks, _scaled(case.topology, 1e6), SCHEDULERS["fair"])
        row: dict[str, Any] = {
            "case": case.name,
            "sizes": case.sizes,
            "network_free_iteration_s": {j: free.jobs[j] / case.iterations for j in case.jobs},
            "schedulers": {},
        }
        for name, sched in SCHEDULERS.items():
            t0 = time.perf_counter()
            r = simulate(case.tasks, case.topology, sched)
            per_job = {j: r.jobs[j] / case.iterations for j in case.jobs}
            row["schedulers"][name] = {
                "iteration_s": per_job,
                "mean_iteration_s": sum(per_job.values()) / len(per_job),
                "events": r.events,
                "wall_s": time.perf_counter() - t0,
            }
            if case.name == "echelon-example":
                row["schedulers"][name]["flow_finish_s"] = [r.finish[f"a{j}"] for j in range(3)]
                row["schedulers"][name]["stage2_done_s"] = r.finish["f2"]
        out.append(row)
        log.info(
            "%s: %s", case.name, {k: v["mean_iteration_s"] for k, v in row["schedulers"].items()}
        )
    return out


def lina_sweep() -> list[dict[str, Any]]:
    out = []
    servers = [f"s{i}" for i in range(cases.MOE_SERVERS)]
    for model in cases.MOE_MODELS:
        for nic in cases.MOE_NICS_GBPS:
            topo = Topology.racks(servers, len(servers), gbps(nic))

            def step(
                sched: str, chunk: float, model: MoEModel = model, topo: Topology = topo
            ) -> float:
                tasks = moe_step(model, servers, cases.MOE_FLOPS, chunk, cases.LAUNCH_S)
                return simulate(tasks, topo, SCHEDULERS[sched]).makespan

            free = simulate(
                moe_step(model, servers, cases.MOE_FLOPS, cases.DDP_BUCKET, cases.LAUNCH_S),
                _scaled(topo, 1e6),
                SCHEDULERS["fair"],
            ).makespan
            row: dict[str, Any] = {
                "model": model.name,
                "hidden": model.hidden,
                "blocks": model.blocks,
                "tokens_per_server": model.tokens,
                "a2a_mb_per_server": model.a2a_bytes() / cases.MB,
                "grad_mb": sum(model.dense_grad_bytes(b, len(servers)) for b in range(model.blocks))
                / cases.MB,
                "nic_gbps": nic,
                "network_free_step_s": free,
                "step_s": {s: step(s, cases.DDP_BUCKET) for s in SCHEDULERS},
                "lina_chunks_s": {str(c): step("lina", c * cases.MB) for c in cases.CHUNKS_MB},
            }
            best = min(row["lina_chunks_s"].values())
            row["lina_best_speedup_vs_fair"] = row["step_s"]["fair"] / best
            out.append(row)
            log.info(
                "%s @%g Gb/s: fair %.1f ms, lina best %.1f ms",
                model.name,
                nic,
                row["step_s"]["fair"] * 1e3,
                best * 1e3,
            )
    return out


def sim_placement(
    max_jobs: int, policy: str, network: str, cluster: str, gpn: int
) -> dict[str, Any]:
    from lyra_ray.model.spec import parse_cluster
    from lyra_ray.model.throughput import load_gavel_throughputs
    from lyra_ray.network.config import parse_network, topology_for
    from lyra_ray.network.ring import RingCommModel
    from lyra_ray.placement.ring import make_placer
    from lyra_ray.policies.base import get_policy
    from lyra_ray.sim.simulator import Simulator
    from lyra_ray.sim.traces import read_gavel_trace

    model = load_gavel_throughputs(THROUGHPUTS)
    specs = read_gavel_trace(TRACE, known_job_types=model.job_types)[:max_jobs]
    nodes = parse_cluster(cluster, gpn)
    topo = topology_for(nodes, parse_network(network))
    out: dict[str, Any] = {
        "trace": TRACE.name,
        "max_jobs": max_jobs,
        "policy": policy,
        "cluster": cluster,
        "gpus_per_node": gpn,
        "network": network,
        "multi_gpu_jobs": sum(s.min_workers > 1 for s in specs),
        "runs": {},
    }
    for label, placer, comm in (
        ("free", "consolidate", False),
        ("consolidate", "consolidate", True),
        ("ring", "ring", True),
    ):
        sim = Simulator(
            nodes,
            get_policy(policy),
            model,
            placer=make_placer(placer, topo),
            network=RingCommModel(topo) if comm else None,
        )
        res = sim.run(specs)
        s = res.summary
        out["runs"][label] = {
            k: s[k]
            for k in (
                "avg_jct_s",
                "median_jct_s",
                "p95_jct_s",
                "makespan_s",
                "completed_jobs",
                "wall_s",
                "core_steps",
            )
        }
        log.info("sim %s: avg JCT %.0f s, wall %.1f s", label, s["avg_jct_s"], s["wall_s"])
    runs = out["runs"]
    out["ring_vs_consolidate_avg_jct"] = (
        runs["consolidate"]["avg_jct_s"] / runs["ring"]["avg_jct_s"]
    )
    # The network model lengthens JCTs, hence the number of core steps: compare the
    # wall time per core step, the model's cost, not the whole run's.
    per_step = {k: r["wall_s"] / max(r["core_steps"], 1) for k, r in runs.items()}
    out["wall_per_step_ratio"] = {
        "consolidate_vs_free": per_step["consolidate"] / per_step["free"],
        "ring_vs_free": per_step["ring"] / per_step["free"],
    }
    return out


def main() -> int:
    from benchmarks._network_report import markdown

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "network.json"))
    ap.add_argument("--markdown", help="also write the tables of docs/network.md here")
    ap.add_argument("--skip-sim", action="store_true", help="skip the trace simulations")
    ap.add_argument("--sim-jobs", type=int, default=400, help="first N jobs of the trace")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    result: dict[str, Any] = {"flow_patterns": flow_patterns(), "lina": lina_sweep()}
    if args.skip_sim:
        result["sim"] = []
    elif not TRACE.exists():
        print(f"skipped the simulations: {TRACE} not found")
        result["sim"] = []
    else:
        result["sim"] = [
            sim_placement(args.sim_jobs, policy, net, cases.SIM_CLUSTER, gpn)
            for policy, gpn, net in cases.SIM_CONFIGS
        ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    if args.markdown:
        Path(args.markdown).write_text(markdown(result))
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
