"""The job side of lyra: what a user's Ray Train loop calls to be schedulable.

:class:`StepLoop` is the public API. The scheduler preempts and resizes a job by asking
it to stop between two steps; the loop then writes a checkpoint holding its step count
and returns, and the next run (possibly with another worker count) restores it and
carries on from that exact step. See :mod:`lyra_ray.train.step_loop` and
``jobs/train_example.py``.
"""

from lyra_ray.train.step_loop import RESUME_KEY, StepLoop, checkpoint_step, latest_checkpoint

__all__ = ["RESUME_KEY", "StepLoop", "checkpoint_step", "latest_checkpoint"]
