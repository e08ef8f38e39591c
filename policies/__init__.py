"""Allocation policies. Every policy implements :class:`lyra_ray.policies.base.Policy`."""
