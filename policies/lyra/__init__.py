"""Lyra (EuroSys'23): capacity loaning and elastic scaling.

Importing the package registers ``lyra``, ``basic`` and ``lyra-baseline``
(:mod:`lyra_ray.policies.lyra.two_phase`).
"""

from lyra_ray.policies.lyra.two_phase import BaselinePolicy, BasicPolicy, LyraPolicy

__all__ = ["BaselinePolicy", "BasicPolicy", "LyraPolicy"]
