"""What lyra asks the cluster's autoscaler for, and what that may cost (pure).

The decision is a function of the scheduler's frozen snapshot, the cluster's node types
and the spend so far (:mod:`~lyra_ray.autoscale.request`); the settings are the
``autoscale:`` block of the ``lyra:`` section (:mod:`~lyra_ray.autoscale.settings`); the
spend is accrued from the nodes that run (:mod:`~lyra_ray.autoscale.spend`). Only the
call that hands the request to Ray lives in the runtime
(:mod:`lyra_ray.runtime.autoscale`). No Ray, no clock, no I/O here.
"""
