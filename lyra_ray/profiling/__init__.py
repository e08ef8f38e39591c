"""``lyra profile``: measured throughputs, alone and in pairs, for the scheduler's table.

Rooms: :mod:`.meter` (pure: when a measurement has converged), :mod:`.plan` (pure: which
measurements a profile takes, and the throughput file they make), :mod:`.core` (torch
and the standard library only: one measurement in processes of its own, also runnable as
``python -m lyra_ray.profiling`` on a machine with nothing but torch), :mod:`.entry`
(Ray: the profiling job's Train loop) and ``lyra_ray/cli/profile.py``. This package's
``__init__`` imports nothing, so the torch-only core stays importable without Ray.
"""
