"""Telemetry: the metrics lyra exports, defined once (pure: no Ray, no clock).

:mod:`catalogue` names every metric; :mod:`values` computes them from the scheduler's
state. The live scheduler exports them through ``ray.util.metrics``
(:mod:`lyra_ray.runtime.metrics`), the simulator's report uses the same names, and the
Grafana dashboard (:mod:`lyra_ray.telemetry.dashboard`) queries only names found here.
"""
