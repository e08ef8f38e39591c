"""Pipeline parallelism (GPipe) as a flow DAG: EchelonFlow's case study.

Stage ``s`` runs the forward of microbatches ``0..M-1`` one after another, sending each
activation to stage ``s + 1``; the backward runs the microbatches in reverse, sending
each activation gradient back. Stage ``s + 1`` consumes one activation every forward
time ``T`` of its own, so the activations crossing one stage boundary in one step form
an EchelonFlow with ``d_j = d_{j-1} + T`` (:func:`arrangement.pipeline`); the gradients
crossing it backwards form another, paced by the receiving stage's backward time.
Every boundary's flows are also one Coflow, which is what a Coflow scheduler would make
finish together. A step ends with a flush: stage ``s``
starts the next step's forward after its last backward.
"""

from __future__ import annotations

from collections.abc import Sequence

from lyra_ray.network import arrangement
from lyra_ray.network.collectives import Labels, send
from lyra_ray.network.flows import Compute, Task


def gpipe(
    job: str,
    stages: Sequence[str],
    microbatches: int,
    forward_s: Sequence[float],
    backward_s: Sequence[float],
    act_bytes: float,
    iterations: int = 1,
) -> list[Task]:
    """``stages[s]`` is the server of stage ``s``; times are per microbatch per stage."""
    n = len(stages)
    if not job:
        raise ValueError("job: a job needs a name (it prefixes every task)")
    if n < 2:
        raise ValueError(f"stages: a pipeline needs >= 2 stages, got {n}")
    if microbatches < 1:
        raise ValueError(f"microbatches: must be >= 1, got {microbatches}")
    if len(forward_s) != n or len(backward_s) != n:
        raise ValueError(f"forward_s, backward_s: need one time per stage ({n})")
    if iterations < 1:
        raise ValueError(f"iterations: must be >= 1, got {iterations}")
    m = microbatches
    tasks: list[Task] = []
    for i in range(iterations):
        for s in range(n):
            fwd_off = arrangement.pipeline(m, forward_s[s + 1]) if s + 1 < n else []
            for j in range(m):
                deps = [f"{job}/F{i}.{s}.{j - 1}"] if j else []
                if not j and i:
                    deps.append(f"{job}/B{i - 1}.{s}.0")
                if s:
                    deps.append(f"{job}/A{i}.{s - 1}.{j}")
                f = f"{job}/F{i}.{s}.{j}"
                tasks.append(Compute(f, forward_s[s], tuple(deps), job=job))
                if s + 1 < n:
                    ech = f"{job}/it{i}/fwd{s}"
                    lab = Labels(job, coflow=ech, echelon=ech, offset=fwd_off[j])
                    a = f"{job}/A{i}.{s}.{j}"
                    tasks.append(send(a, stages[s], stages[s + 1], act_bytes, [f], lab))
        for s in range(n - 1, -1, -1):
            bwd_off = arrangement.pipeline(m, backward_s[s - 1]) if s else []
            for k, j in enumerate(range(m - 1, -1, -1)):
                deps = [f"{job}/B{i}.{s}.{j + 1}"] if k else [f"{job}/F{i}.{s}.{m - 1}"]
                if s + 1 < n:
                    deps.append(f"{job}/G{i}.{s + 1}.{j}")
                b = f"{job}/B{i}.{s}.{j}"
                tasks.append(Compute(b, backward_s[s], tuple(deps), job=job))
                if s:
                    ech = f"{job}/it{i}/bwd{s}"
                    lab = Labels(job, coflow=ech, echelon=ech, offset=bwd_off[k])
                    g = f"{job}/G{i}.{s}.{j}"
                    tasks.append(send(g, stages[s], stages[s - 1], act_bytes, [b], lab))
    return tasks
