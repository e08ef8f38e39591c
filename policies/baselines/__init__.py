"""Heterogeneity-agnostic baselines that prove the loop and anchor comparisons."""

from policies.baselines import fifo_nonpreemptive as fifo_nonpreemptive
