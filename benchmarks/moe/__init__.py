"""MoE serving measurement: load runs, calibration, seed sweeps, estimator comparison.

Run through benchmarks/moe_serving.py and benchmarks/moe_plan.py; ``moe_serving`` itself
never imports this.
"""
