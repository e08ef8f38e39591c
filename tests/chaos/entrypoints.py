"""Train loops for the chaos campaign: the example model, and one whose code raises.

Importable by the Ray workers of a test cluster (the repository is on their
PYTHONPATH), named in job specs as ``tests.chaos.entrypoints:<function>``.
"""

from __future__ import annotations

from typing import Any

from lyra_ray.jobs.train_example import train_loop
from lyra_ray.train import StepLoop


def failing_loop(config: dict[str, Any]) -> None:
    """Steps until ``fail_at``, then raises: the user's code failing, not the system."""
    loop = StepLoop(config)
    loop.restore()
    fail_at = int(config.get("fail_at", 5))
    for step in loop.steps(lambda: {}):
        if step >= fail_at:
            raise ValueError(f"user code raised at step {step}")


__all__ = ["failing_loop", "train_loop"]
