"""Ray Train's API inside a lyra warm worker (#47): the loop's own calls
(``ray.train.get_context``, ``report``, ``get_checkpoint``, ``ray.train.torch.get_device``)
answered by :class:`LyraTrainFnUtils`, checkpoints where Ray Train puts them, and a
:class:`StepLoop` saving and resuming through it. No cluster: these are in-process calls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import ray.train
import ray.train.torch
import torch
from ray.train.v2._internal.execution.train_fn_utils import set_train_fn_utils

from lyra_ray.train import StepLoop
from lyra_ray.train.fn_utils import LyraTrainFnUtils, RunContext, install
from lyra_ray.train.step_loop import RESUME_KEY, latest_checkpoint  # re-exported there
from lyra_ray.train.storage import STATE_FILE, persist_dir


def ctx(storage: Path, rank: int = 0, world: int = 1) -> RunContext:
    return RunContext("lyra-j1", str(storage), rank, world, rank, world, 0)


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    yield
    set_train_fn_utils(None)


def test_the_context_and_device_are_the_runs(tmp_path: Path) -> None:
    install(LyraTrainFnUtils(RunContext("lyra-j1", str(tmp_path), 2, 4, 0, 2, 1)))
    c = ray.train.get_context()
    assert (c.get_world_rank(), c.get_world_size(), c.get_local_rank()) == (2, 4, 0)
    assert (c.get_local_world_size(), c.get_node_rank()) == (2, 1)
    assert c.get_experiment_name() == "lyra-j1"
    assert ray.train.torch.get_device() == torch.device("cpu")  # no CUDA on this host
    assert ray.train.get_checkpoint() is None
    with pytest.raises(RuntimeError, match="Ray Data"):
        ray.train.get_dataset_shard("train")


def test_a_reported_checkpoint_lands_under_the_run_directory(tmp_path: Path) -> None:
    utils = LyraTrainFnUtils(ctx(tmp_path / "store"))
    install(utils)
    src = tmp_path / "src"
    src.mkdir()
    (src / "state.pt").write_bytes(b"x" * 100)
    (src / STATE_FILE).write_text(json.dumps({"step": 7}))
    ray.train.report({"step": 7}, checkpoint=ray.train.Checkpoint.from_directory(str(src)),
                     checkpoint_dir_name="step_000000007")  # fmt: skip
    dest = tmp_path / "store" / "lyra-j1" / "step_000000007"
    assert (dest / "state.pt").read_bytes() == b"x" * 100
    assert utils.persisted == str(dest) and utils.metrics == {"step": 7}
    got = ray.train.get_checkpoint()
    assert got is not None and Path(got.path) == dest
    assert latest_checkpoint(tmp_path / "store" / "lyra-j1") == (str(dest), 7)
    ray.train.report({"loss": 1.0})  # metrics alone: the checkpoint stays
    assert ray.train.get_checkpoint() is not None and utils.metrics == {"loss": 1.0}


def test_the_step_marker_is_copied_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy cut short must not look complete: the marker goes after every other file."""
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    for name in ("a.bin", STATE_FILE, "sub/b.bin"):
        (src / name).write_text(name)
    from lyra_ray.train import storage

    order: list[str] = []
    real = storage.filesystem

    class Spy:
        def __init__(self, fs: object) -> None:
            self.fs = fs

        def __getattr__(self, name: str) -> object:
            return getattr(self.fs, name)

        def open_output_stream(self, path: str) -> object:
            order.append(Path(path).name)
            return self.fs.open_output_stream(path)  # type: ignore[attr-defined]

    def spied(path: str) -> tuple[object, str]:
        fs, inner = real(path)
        return Spy(fs), inner

    monkeypatch.setattr(storage, "filesystem", spied)
    persist_dir(src, f"file://{tmp_path / 'out'}")  # a URI goes through pyarrow the same way
    assert order[-1] == STATE_FILE and sorted(order) == sorted(["a.bin", "b.bin", STATE_FILE])
    assert (tmp_path / "out" / "sub" / "b.bin").read_text() == "sub/b.bin"


def test_a_step_loop_saves_and_resumes_through_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    install(LyraTrainFnUtils(ctx(store)))
    w = torch.zeros(2)
    loop = StepLoop({"total_steps": 5, "checkpoint_every": 2})
    assert loop.restore() is None
    for _ in loop.steps(lambda: {"w": w.clone()}):
        w.add_(1)
    assert loop.step == 5 and not loop.stopped
    found = latest_checkpoint(store / "lyra-j1")
    assert found is not None and found[1] == 5
    install(LyraTrainFnUtils(ctx(store)))  # the next run, told where to resume
    again = StepLoop({"total_steps": 9, RESUME_KEY: found[0]})
    state = again.restore()
    assert again.step == 5 and state is not None and state["w"].tolist() == [5.0, 5.0]


def test_the_example_jobs_extra_state_comes_back_exactly(tmp_path: Path) -> None:
    """``state_mb`` (the resize benchmark's 200 MB job): the buffer travels with every
    checkpoint and a resumed run checks it counts exactly the steps done."""
    from lyra_ray.jobs.train_example import train_loop

    store = tmp_path / "store"
    install(LyraTrainFnUtils(ctx(store)))
    train_loop({"total_steps": 6, "checkpoint_every": 4, "state_mb": 0.01})
    found = latest_checkpoint(store / "lyra-j1")
    assert found is not None and found[1] == 6
    state = torch.load(Path(found[0]) / "state.pt", weights_only=False)
    assert state["extra"].numel() == 2621 and float(state["extra"].sum()) == 6.0
    install(LyraTrainFnUtils(ctx(store)))
    train_loop({"total_steps": 9, "state_mb": 0.01, RESUME_KEY: found[0]})
    assert latest_checkpoint(store / "lyra-j1") == (str(store / "lyra-j1" / "step_000000009"), 9)


def test_the_checkpoint_reported_last_is_recorded_for_the_next_generation(tmp_path: Path) -> None:
    """Ray Train hands a rerun of the same name the checkpoint reported last, whatever it
    holds (a user's own files, no lyra marker); warm workers read the record this writes
    (``lyra_ray.runtime.gang``) and hand the same to the next generation."""
    from lyra_ray.train.storage import LAST_REPORTED_FILE, last_reported

    run_dir = tmp_path / "store" / "lyra-j1"
    assert last_reported(run_dir) is None  # nothing reported yet
    install(LyraTrainFnUtils(ctx(tmp_path / "store")))
    src = tmp_path / "src"
    src.mkdir()
    (src / STATE_FILE).write_text(json.dumps({"step": 4}))
    ray.train.report({"step": 4}, checkpoint=ray.train.Checkpoint.from_directory(str(src)),
                     checkpoint_dir_name="step_000000004")  # fmt: skip
    assert last_reported(run_dir) == str(run_dir / "step_000000004")
    own = tmp_path / "own"
    own.mkdir()
    (own / "mine.json").write_text('{"epoch": 3}')  # the user's format: no step marker
    ray.train.report({"epoch": 3}, checkpoint=ray.train.Checkpoint.from_directory(str(own)))
    handed = last_reported(run_dir)
    assert handed is not None and (Path(handed) / "mine.json").read_text() == '{"epoch": 3}'
    assert latest_checkpoint(run_dir) == (str(run_dir / "step_000000004"), 4)  # lyra's hint
    # the next generation: get_checkpoint() is the user's, StepLoop still resumes at 4
    install(LyraTrainFnUtils(ctx(tmp_path / "store"), ray.train.Checkpoint(handed)))
    got = ray.train.get_checkpoint()
    assert got is not None and Path(got.path) == Path(handed)
    # a record naming a checkpoint that is gone, or unreadable, names nothing
    import shutil

    shutil.rmtree(handed)
    assert last_reported(run_dir) is None
    (run_dir / LAST_REPORTED_FILE).write_text("{not json")
    assert last_reported(run_dir) is None
    assert not list(run_dir.glob("*.tmp"))  # the side file was moved into place
