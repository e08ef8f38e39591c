"""Lyra (EuroSys'23): capacity loaning and elastic scaling.

Importing the package registers ``lyra``, ``basic`` and ``lyra-baseline``
(:mod:`lyra_ray.policies.lyra.two_phase`, :mod:`lyra_ray.policies.lyra.scenarios`).
"""

from lyra_ray.policies.lyra.scenarios import BaselinePolicy, BasicPolicy
from lyra_ray.policies.lyra.two_phase import LyraPolicy

__all__ = ["BaselinePolicy", "BasicPolicy", "LyraPolicy"]
