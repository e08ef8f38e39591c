"""Heterogeneity-agnostic baselines that prove the loop and anchor comparisons."""

from lyra_ray.policies.baselines import fifo_nonpreemptive as fifo_nonpreemptive
