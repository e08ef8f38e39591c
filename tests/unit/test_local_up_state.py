"""``lyra up --local`` after ``lyra down`` starts a clean scheduler (issue #31, item 6).

``down`` ends processes only; the scheduler state and checkpoints it kept under its
``--dir`` stayed, and the next ``up`` restored them (a different ``--policy`` refused to
start: "policy 'lyra' keeps no state, but a saved state has ['kept', 'rng']").
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from lyra_ray.ops.local import _forget_old_cluster


def test_an_old_local_clusters_state_is_removed_and_nothing_else(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for d in ("state", "checkpoints"):
        (home / d).mkdir(parents=True)
        (home / d / "lyra.sqlite").write_text("old")
    (home / "token").write_text("kept")
    elsewhere = tmp_path / "mine" / "state"  # a --config's own directory: never touched
    elsewhere.mkdir(parents=True)
    _forget_old_cluster(
        home, SimpleNamespace(state_dir=str(home / "state"), storage_path=str(elsewhere))
    )
    assert not (home / "state").exists()
    assert (home / "checkpoints").exists() and elsewhere.exists() and (home / "token").exists()
    _forget_old_cluster(  # nothing left to remove: no error
        home, SimpleNamespace(state_dir=str(home / "state"), storage_path=str(elsewhere))
    )
