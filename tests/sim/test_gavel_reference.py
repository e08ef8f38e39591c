"""Every Gavel policy we ship against Gavel's own simulator, setting by setting.

Gavel's figures live in ``tests/data/gavel_reference.json``, each with the command that
made it (``scripts/gavel_reference.py`` runs Gavel's trace driver in a Gavel checkout).
Each setting is replayed here through the real core and simulator and held within 5 %
of Gavel's average JCT. A setting that cannot be held there carries a written reason in
``tests/data/gavel_deviations.json``, with the band it is held to instead and, where
the average is off, the rest of the distribution (median, p95) it still matches.

``max_min_fairness.trace`` settings take well under a second each and always run. The
generated 2,000- and 3,000-job traces take a minute or more per policy: they run with
``LYRA_GAVEL_LONG=1`` (and in ``benchmarks/gavel_fidelity.py``, which writes JSON).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.gavel_fidelity import SHARED, simulate  # noqa: E402

DATA = ROOT / "tests" / "data"
REFERENCE = json.loads((DATA / "gavel_reference.json").read_text())
DEVIATIONS: dict[str, dict[str, Any]] = json.loads((DATA / "gavel_deviations.json").read_text())
LONG = os.environ.get("LYRA_GAVEL_LONG") == "1"
TOLERANCE = 0.05

pytestmark = pytest.mark.data

_FIGURES = {k: v for k, v in REFERENCE["settings"].items() if "avg_jct_s" in v}


def _params() -> list[Any]:
    out = []
    for key in sorted(_FIGURES):
        long = not key.startswith("max_min_fairness|")
        marks = [pytest.mark.skipif(long and not LONG, reason="long trace: LYRA_GAVEL_LONG=1")]
        out.append(pytest.param(key, id=key.replace("|", "-"), marks=marks))
    return out


def test_the_table_covers_at_least_thirty_settings_each_with_its_command() -> None:
    assert len(_FIGURES) >= 30
    for key, entry in REFERENCE["settings"].items():
        assert entry["command"].startswith("cd $GAVEL/scheduler && python scripts/drivers/"), key
        assert key.split("|")[1:] == [entry["cluster"], entry["policy"]], key
    assert REFERENCE["gavel"]["commit"]


def test_every_setting_gavel_could_not_run_says_why() -> None:
    failed = {k: v for k, v in REFERENCE["settings"].items() if "avg_jct_s" not in v}
    for key, entry in failed.items():
        assert entry["error"], key


def test_every_deviation_names_a_setting_and_a_reason() -> None:
    for key, dev in DEVIATIONS.items():
        assert key in _FIGURES, key
        assert len(dev["reason"]) > 80, key
        assert dev["avg_band"] > TOLERANCE, key


@pytest.mark.parametrize("key", _params())
def test_within_five_percent_of_gavel_or_its_stated_band(key: str) -> None:
    if not (SHARED / "traces").exists():
        pytest.skip(f"{SHARED} not found")
    gavel = _FIGURES[key]
    ours = simulate(gavel)
    assert ours["jobs"] == gavel["jobs"], (key, ours["jobs"], gavel["jobs"])
    dev = DEVIATIONS.get(key)
    band = dev["avg_band"] if dev else TOLERANCE
    ratio = ours["avg_jct_s"] / gavel["avg_jct_s"]
    assert abs(ratio - 1) <= band, (key, ours["avg_jct_s"], gavel["avg_jct_s"], ratio)
    if dev:
        for stat, allowed in dev.get("other_bands", {}).items():
            r = ours[stat] / gavel[stat]
            assert abs(r - 1) <= allowed, (key, stat, ours[stat], gavel[stat], r)
