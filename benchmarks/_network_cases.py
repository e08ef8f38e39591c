"""The inputs of ``benchmarks/network.py``: every case with its sizes stated.

Kept apart from the script so that the numbers the docs quote live in one place. Times
are per step on an A100-class GPU; bytes are what one server sends per collective.
"""

from __future__ import annotations

from dataclasses import dataclass

from lyra_ray.network import arrangement
from lyra_ray.network.flows import Compute, Flow, Task
from lyra_ray.network.moe import MoEModel
from lyra_ray.network.patterns import Layer, data_parallel, fsdp, tensor_parallel
from lyra_ray.network.pipeline import gpipe
from lyra_ray.network.topology import Topology, gbps

MB = 1e6
ITERATIONS = 3


@dataclass(frozen=True)
class Case:
    name: str
    sizes: str
    topology: Topology
    tasks: list[Task]
    jobs: tuple[str, ...]
    iterations: int = ITERATIONS


def fabric(oversubscription: float) -> Topology:
    """Two racks of four servers, 100 Gb/s NICs."""
    return Topology.racks(8, 4, gbps(100), oversubscription)


def echelon_example() -> Case:
    """EchelonFlow's pipeline example: three 2B-byte activations ready at once for the
    next stage over one link of B = 1 byte/s; that stage's forward takes T = 2 s."""
    b, t = 1.0, 2.0
    offsets = arrangement.pipeline(3, t)
    tasks: list[Task] = []
    for j in range(3):
        tasks.append(
            Flow(
                f"a{j}",
                "w1",
                "w2",
                2 * b,
                job="pp",
                coflow="acts",
                echelon="acts",
                offset=offsets[j],
            )
        )
        tasks.append(Compute(f"f{j}", t, (f"a{j}",) + ((f"f{j - 1}",) if j else ()), job="pp"))
    return Case(
        "echelon-example",
        "3 flows of 2B bytes, B = 1 B/s, T = 2 s",
        Topology(["w1", "w2"], [0, 0], b),
        tasks,
        ("pp",),
        1,
    )


DP_LAYERS = [Layer(4e-3, 8e-3, 80 * MB)] * 24


def pp(job: str, stages: list[str]) -> list[Task]:
    """GPipe, 8 microbatches, fwd/bwd 4/8 ms per microbatch per stage, 64 MB activations."""
    return gpipe(job, stages, 8, [4e-3] * len(stages), [8e-3] * len(stages), 64 * MB, ITERATIONS)


TP_LAYERS = [Layer(6e-3, 12e-3, 0.0, 32 * MB)] * 12
FSDP_LAYERS = [Layer(4e-3, 8e-3, 80 * MB)] * 24


def pattern_cases() -> list[Case]:
    """One job per pattern on the 2:1 fabric, then three jobs sharing a 4:1 fabric."""
    s = [f"s{i}" for i in range(8)]
    two = fabric(2.0)
    cases = [
        Case(
            "DP",
            "8 workers (4 per rack), 24 layers of 80 MB gradients, fwd/bwd 4/8 ms "
            "per layer, all-reduce per layer as soon as its gradient exists",
            two,
            data_parallel("dp", s, DP_LAYERS, ITERATIONS),
            ("dp",),
        ),
        Case(
            "PP",
            "GPipe, 4 stages on s2..s5 (the s3->s4 boundary crosses racks), 8 "
            "microbatches, fwd/bwd 4/8 ms per microbatch per stage, 64 MB activations",
            two,
            pp("pp", s[2:6]),
            ("pp",),
        ),
        Case(
            "TP",
            "4-way tensor parallel across s0..s3, 12 layers, 2+2 all-reduces of "
            "32 MB activations per layer, fwd/bwd 6/12 ms per layer",
            two,
            tensor_parallel("tp", s[:4], TP_LAYERS, ITERATIONS),
            ("tp",),
        ),
        Case(
            "FSDP",
            "8 workers, 24 layers of 80 MB parameters, fwd/bwd 4/8 ms per layer, "
            "all forward all-gathers issued at step start",
            two,
            fsdp("fsdp", s, FSDP_LAYERS, ITERATIONS),
            ("fsdp",),
        ),
    ]
    four = fabric(4.0)
    mixed = (
        data_parallel("dp", [s[0], s[1], s[4], s[5]], DP_LAYERS, ITERATIONS)
        + pp("pp", [s[1], s[5], s[2], s[6]])
        + fsdp("fsdp", [s[2], s[3], s[6], s[7]], FSDP_LAYERS, ITERATIONS)
    )
    cases.append(
        Case(
            "shared",
            "DP on s0,s1,s4,s5 + PP on s1,s5,s2,s6 (every boundary crosses "
            "racks) + FSDP on s2,s3,s6,s7, sizes as above, 4:1 oversubscribed spine",
            four,
            mixed,
            ("dp", "pp", "fsdp"),
        )
    )
    return cases


MOE_MODELS = [
    MoEModel("MoE-S", hidden=1024, blocks=12, seq_len=1024, seqs_per_server=8),
    MoEModel("MoE-L", hidden=2048, blocks=12, seq_len=1024, seqs_per_server=4),
]
MOE_NICS_GBPS = (100.0, 25.0)
MOE_SERVERS = 8
MOE_FLOPS = 100e12
DDP_BUCKET = 25 * MB
CHUNKS_MB = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
LAUNCH_S = 50e-6

SIM_CLUSTER = "v100=32,p100=32,k80=32"
SIM_CONFIGS = [
    # (policy, GPUs per server, --network): one-GPU servers as in Gavel's setting, where
    # every multi-GPU job spans servers, then four-GPU servers where most fit in one.
    ("max_min_fairness_perf", 1, "servers_per_rack=8,nic_gbps=10,oversubscription=4"),
    ("fifo", 1, "servers_per_rack=8,nic_gbps=10,oversubscription=4"),
    ("max_min_fairness_perf", 4, "servers_per_rack=4,nic_gbps=25,oversubscription=4"),
]
