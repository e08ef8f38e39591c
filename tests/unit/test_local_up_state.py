"""``lyra up`` over an earlier cluster's ``--dir`` keeps everything (issue #42, item 1).

``lyra down`` ends processes only. The next ``lyra up`` with the same ``--dir`` resumes
every unfinished job and the archive; only ``--fresh`` starts without them, and moves
them aside instead of deleting them. A state lyra cannot resume from (unreadable, or
written by a newer lyra) is refused in one line before any process starts, and left
byte for byte as it was. (An earlier fix deleted ``D/state`` and ``D/checkpoints`` on
every ``lyra up --local``: every queued and running job was lost.) The live
down-then-up is ``tests/chaos/test_chaos_restart.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from lyra_ray.cli import main
from lyra_ray.model import JobSpec, Node
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.ops.local import set_aside
from lyra_ray.policies.base import get_policy
from lyra_ray.runtime.saved_state import SavedStateError, describe, inspect_saved
from lyra_ray.runtime.store import STATE_FORMAT, StateStore
from lyra_ray.sim.simulator import Simulator


def _files(d: Path) -> dict[str, str]:
    """Every file under ``d`` with its digest: what "touches nothing" compares."""
    return {
        str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(d.rglob("*"))
        if p.is_file()
    }


def _saved_state(state_dir: Path) -> None:
    """A real core's state mid-workload, committed as the live scheduler commits it,
    with a service and one archived job."""
    nodes = [Node("v0", "v100", 2), Node("i0", "t4", 1, "inference")]
    specs = [
        JobSpec(name=f"j{i}", total_steps=500.0, arrival_s=10.0 * i, throughput={"v100": 1.0})
        for i in range(4)
    ]
    sim = Simulator(nodes, get_policy("fifo"), SpecThroughputs(), round_s=60.0)
    sim.max_time_s = 100.0
    core = sim.run(specs).core
    store = StateStore(state_dir)
    serving = {"services": {"chat": {"name": "chat"}}}
    store.commit({"core": core.to_state(), "serving": serving}, [], [("j9", {"id": "j9"})])
    store.close()


def test_a_saved_state_is_summarised_without_touching_it(tmp_path: Path) -> None:
    d = tmp_path / "state"
    assert inspect_saved(d) is None  # nothing saved: a new scheduler
    _saved_state(d)
    before = _files(d)
    got = inspect_saved(d)
    assert got is not None and _files(d) == before
    assert got.format == STATE_FORMAT and got.policy == "fifo" and got.archived == 1
    assert got.unfinished == 4 and set(got.statuses) <= {"queued", "running"}, got.statuses
    assert got.services == ("chat",) and got.nodes == 2
    line = describe(got, "lyra")
    assert "\n" not in line and "4 " not in line.split(":")[0]
    assert "the policy changed from fifo to lyra" in line and "chat" in line
    assert "policy changed" not in describe(got, "fifo")


@pytest.mark.parametrize("damage", ["newer", "garbage", "empty", "no core"])
def test_a_state_lyra_cannot_resume_from_is_refused_in_one_line_untouched(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    d = home / "state"
    d.mkdir(parents=True)
    db = d / "lyra.sqlite"
    if damage == "newer":
        _saved_state(d)
        store = StateStore(d)
        store._db.execute("UPDATE kv SET value = ? WHERE key = 'format'", (str(STATE_FORMAT + 1),))
        store.close()
    elif damage == "garbage":
        db.write_bytes(b"not a database\x00" * 200)
    elif damage == "empty":
        db.write_bytes(b"")
    else:  # a state whose core lost its jobs: cannot be resumed, must not be half-read
        store = StateStore(d)
        store.commit({"core": {"nodes": []}}, [], [])
        store.close()
    before = _files(home)
    if damage == "empty":  # SQLite takes an empty file as an empty database: nothing saved
        assert inspect_saved(d) is None
        return
    with pytest.raises(SavedStateError) as err:
        inspect_saved(d)
    msg = str(err.value)
    assert "\n" not in msg and str(db) in msg and "nothing was changed" in msg
    assert ("newer lyra" in msg) == (damage == "newer")
    # `lyra up` refuses before any process starts, and leaves the files as they were (and
    # this process's environment: the auth mode is chosen only once nothing can refuse)
    auth = os.environ.get("RAY_AUTH_MODE")
    assert main(["up", "--local", "--nodes", "v100=1", "--dir", str(home)]) == 2
    assert os.environ.get("RAY_AUTH_MODE") == auth
    out = capsys.readouterr().err.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("lyra: error: ") and str(db) in out[0], out
    assert _files(home) == before and not (home / "up.json").exists()


def test_fresh_moves_the_earlier_state_aside_and_deletes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for sub in ("state", "checkpoints"):
        (home / sub).mkdir(parents=True)
        (home / sub / "kept").write_text(sub)
    (home / "token").write_text("kept")
    cfg = SimpleNamespace(state_dir=str(home / "state"), storage_path=str(home / "checkpoints"))
    moved = [Path(p) for p in set_aside(cfg)]
    assert [p.name.split(".previous-")[0] for p in moved] == ["state", "checkpoints"]
    assert [(p / "kept").read_text() for p in moved] == ["state", "checkpoints"]
    assert not (home / "state").exists() and (home / "token").read_text() == "kept"
    assert set_aside(cfg) == []  # nothing left to move: no error, nothing touched
    json.dumps(moved, default=str)
