"""Pipeline schedules: how long a batch takes, how much idles, and what is kept in memory.

With ``p`` stages and ``m`` microbatches, GPipe (all forwards, then all backwards) and
1F1B (PipeDream-Flush: one forward, one backward) both take ``m + p - 1`` stage-slots,
so the bubble is ``(p - 1) / m`` of the ideal time. The interleaved schedule gives each
device ``v`` model chunks; fill and drain then cost a chunk's time, not a stage's, and the
bubble shrinks to ``(p - 1) / (v m)`` (PTD-P paper, section 2.2). The three differ in
memory: GPipe keeps every microbatch's activations, 1F1B at most ``p - k`` on stage ``k``,
interleaving ``p + (p - 1)/v`` stage-equivalents on the first device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

Schedule = Literal["gpipe", "1f1b", "interleaved"]
SCHEDULES: tuple[Schedule, ...] = ("gpipe", "1f1b", "interleaved")


def bubble_fraction(p: int, m: int, v: int = 1) -> float:
    """Idle time over ideal time for balanced stages: ``(p - 1) / (v m)``."""
    if p < 1 or m < 1 or v < 1:
        raise ValueError(f"p, m and v must be >= 1, got p={p}, m={m}, v={v}")
    return (p - 1) / (v * m)


def pipeline_time(device_times: Sequence[float], m: int, v: int = 1) -> float:
    """Time of one batch through the pipeline (flush included).

    ``device_times[k]`` is device ``k``'s time for one microbatch (forward + backward,
    all its chunks). Steady state runs at the slowest device; filling and draining the
    pipe costs every other device's time once, divided by ``v`` when each device's work
    is split into ``v`` interleaved chunks. Balanced stages give
    ``(m + (p - 1)/v) * f``, i.e. the bubble of :func:`bubble_fraction`.
    """
    if not device_times or m < 1 or v < 1:
        raise ValueError("need at least one device, m >= 1 and v >= 1")
    slowest = max(device_times)
    return m * slowest + (sum(device_times) - slowest) / v


def in_flight(schedule: Schedule, stage: int, p: int, m: int, v: int = 1) -> float:
    """Microbatches whose activations stage ``stage`` holds at its peak, in units of one
    microbatch's activations for the whole stage (all its chunks)."""
    if schedule == "gpipe":
        return float(m)
    if schedule == "1f1b":
        return float(min(m, p - stage))
    # Megatron-LM's interleaved warm-up: (p - k - 1) * 2 + (v - 1) * p chunk-forwards
    # before the first backward, plus the one in progress; a chunk is 1/v of the stage.
    chunks = (p - stage - 1) * 2 + (v - 1) * p + 1
    return min(float(m), chunks / v)


def valid(schedule: Schedule, p: int, m: int, v: int, layers_per_device: int) -> bool:
    """Whether the schedule can run: interleaving needs ``v >= 2`` chunks of at least one
    layer each, more than one stage, and ``m`` a multiple of ``p`` (Megatron-LM and
    ``torch.distributed.pipelining`` both require it). 1F1B needs ``m >= p``:
    ``torch.distributed.pipelining.Schedule1F1B`` refuses fewer microbatches than stages
    (Megatron-LM runs them, as GPipe in all but the later stages' memory), and a plan
    that the runtime's library refuses is no plan."""
    if schedule == "1f1b":
        return v == 1 and m >= p
    if schedule != "interleaved":
        return v == 1
    return p > 1 and v >= 2 and m % p == 0 and layers_per_device >= v
