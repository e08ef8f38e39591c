"""Gavel's heterogeneity-aware policies (OSDI'20) as sparse LPs solved by HiGHS.

Importing this package registers every policy under the name Gavel uses.
"""

from lyra_ray.policies.gavel import (
    allox,
    cost,
    fifo,
    finish_time_fairness,
    gandiva,
    isolated,
    max_min_fairness,
    max_sum_throughput,
    min_total_duration,
    packed,
    water_filling,
)

__all__ = [
    "allox",
    "cost",
    "fifo",
    "finish_time_fairness",
    "gandiva",
    "isolated",
    "max_min_fairness",
    "max_sum_throughput",
    "min_total_duration",
    "packed",
    "water_filling",
]
