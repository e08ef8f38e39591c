"""Hypothesis draws the same examples on every run unless asked for new ones.

WHY: ``make test`` gates every landing, and a property test that draws fresh random
instances each run can fail on one no change caused (a water-filling example once
failed only because the cvxpy *reference* froze too early). Exploring stays one
variable away: ``LYRA_HYPOTHESIS_RANDOM=1 make test-unit`` draws new examples and keeps
failing ones in ``.hypothesis/`` (ignored by git) to replay them.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("lyra-ci", derandomize=True, database=None)
settings.register_profile("lyra-explore", derandomize=False)
settings.load_profile(
    "lyra-explore" if os.environ.get("LYRA_HYPOTHESIS_RANDOM") == "1" else "lyra-ci"
)
