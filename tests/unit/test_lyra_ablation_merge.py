"""``lyra_ablation.py --only``: a row re-run alone joins the stored ones only when the
stored defaults come out equal beside it (same code, same price); else nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.lyra_ablation import RESTART_S, merged


def _doc(lyra: dict[str, Any], price: float = RESTART_S) -> dict[str, Any]:
    return {"restart_s": {"pollux": price}, "pollux": {"lyra": lyra, "naive": {"all": 3}}}


def test_a_new_row_is_merged_beside_the_stored_ones() -> None:
    got = merged(_doc({"all": 20}), "pollux", {"lyra": {"all": 20}, "new": {"all": 5}}, ["new"])
    assert got == {"lyra": {"all": 20}, "naive": {"all": 3}, "new": {"all": 5}}


@pytest.mark.parametrize(
    ("doc", "why"),
    [(_doc({"all": 19}), "defaults differ"), (_doc({"all": 20}, price=8.3), "another price")],
)
def test_results_made_by_other_code_or_price_are_refused(doc: dict[str, Any], why: str) -> None:
    with pytest.raises(SystemExit, match="nothing written: run the whole ablation"):
        merged(doc, "pollux", {"lyra": {"all": 20}, "new": {"all": 5}}, ["new"])


def test_a_whole_run_replaces_the_part() -> None:
    assert merged(_doc({"all": 1}), "pollux", {"lyra": {"all": 2}}, None) == {"lyra": {"all": 2}}
