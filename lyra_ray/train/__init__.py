"""The job side of lyra: what a user's Ray Train loop calls to be schedulable.

:class:`StepLoop` is the public API. The scheduler preempts and resizes a job by asking
it to stop between two steps; the loop then writes a checkpoint holding its step count
and returns, and the next run (possibly with another worker count) restores it and
carries on from that exact step. See :mod:`lyra_ray.train.step_loop` and
``jobs/train_example.py``.

WHY the names are resolved on first use (PEP 562): :mod:`~lyra_ray.train.step_loop`
imports PyTorch and Ray Train (1.5 s on an idle core), and the scheduler actor, which
imports this package's light modules (storage, user code) but never runs a step, paid
that at every start and restart.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lyra_ray.train.step_loop import RESUME_KEY, StepLoop, checkpoint_step, latest_checkpoint

__all__ = ["RESUME_KEY", "StepLoop", "checkpoint_step", "latest_checkpoint"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from lyra_ray.train import step_loop

        return getattr(step_loop, name)
    raise AttributeError(f"module 'lyra_ray.train' has no attribute {name!r}")
