"""The oracle's horizon: until serving next needs a server lent now (benchmarks only)."""

from __future__ import annotations

import math

from benchmarks._loan_oracle import next_reclaim_s

TIMES = [0.0, 600.0, 1200.0, 1800.0, 2400.0]
SERVERS = [4, 2, 3, 5, 7]  # of 8 inference servers


def test_until_demand_passes_what_serving_keeps() -> None:
    # 3 lent of 8: serving keeps 5, and needs a sixth at 2,400 s.
    assert next_reclaim_s(TIMES, SERVERS, 700.0, 8, 3) == 1700.0
    # 6 lent: serving keeps 2, and needs a third at 1,200 s.
    assert next_reclaim_s(TIMES, SERVERS, 700.0, 8, 6) == 500.0


def test_nothing_lent_means_any_rise_and_none_means_never() -> None:
    assert next_reclaim_s(TIMES, SERVERS, 600.0, 8, 0) == 600.0  # 2 now, 3 at 1,200 s
    assert next_reclaim_s(TIMES, SERVERS, 0.0, 8, 1) == math.inf  # 7 kept, never more
    assert next_reclaim_s(TIMES, SERVERS, 5000.0, 8, 2) == math.inf  # past the series
