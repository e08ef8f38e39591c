"""The user's own code that ``test_user_code`` writes into working directories (training
loops, a decorated entrypoint, modules that fail at import), and readers of the step and
API logs that code writes. Text only: each is written to a directory the job is then
submitted from, so that lyra imports it as a user's module, never as part of the tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

USER_TRAIN = '''
"""A user's training function: it lives only in this directory."""
import time

from lyra_ray.train import StepLoop


def train_loop(config):
    loop = StepLoop(config)
    state = loop.restore() or {"seen": 0}
    seen = state["seen"]
    for step in loop.steps(lambda: {"seen": seen}):
        seen += 1
        time.sleep(config["step_sleep_s"])
        if loop.rank == 0:
            with open(config["step_log"], "a") as f:
                f.write(f"{loop.generation} {step}\\n")
    assert loop.stopped or seen == loop.total_steps, (seen, loop.total_steps)
'''


WRAPPED_TRAIN = '''
"""A user's decorated entrypoint: the decorator does not copy the signature, so the
function lyra is given is ``train(*args, **kwargs)``."""
from lyra_ray.jobs.train_example import train_loop as example_loop


def traced(fn):
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)

    return wrapper


@traced
def train(config):
    return example_loop(config)
'''


RAY_API_TRAIN = '''
"""A user's loop written against Ray Train's own API: its ranks from Ray Train's context,
its own gloo all-reduce every step, its own checkpoint reported with ray.train.report and
read back with ray.train.get_checkpoint(). StepLoop only says when to stop and counts."""
import json
import os
import tempfile
import time

import ray.train
import torch
import torch.distributed as dist

from lyra_ray.train import StepLoop


def train_loop(config):
    ctx = ray.train.get_context()
    world, rank = ctx.get_world_size(), ctx.get_world_rank()
    assert dist.is_initialized() and dist.get_backend() == "gloo", "no gloo process group"
    assert (dist.get_world_size(), dist.get_rank()) == (world, rank)
    loop = StepLoop(config)
    loop.restore()  # lyra's step count (its own checkpoint, or the hint it passes)
    assert (loop.world, loop.rank) == (world, rank)
    mine = {"step": 0, "rank_sum": 0.0}
    handed = ray.train.get_checkpoint()  # the last one reported: the user's own
    if handed is not None:
        with handed.as_directory() as d:
            if os.path.exists(os.path.join(d, "mine.json")):
                with open(os.path.join(d, "mine.json")) as f:
                    mine = json.load(f)
    if rank == 0:
        with open(config["api_log"], "a") as f:
            f.write(json.dumps({"generation": loop.generation, "world": world,
                                "lyra_step": loop.step, "handed": mine}) + "\\n")
    for step in loop.steps(lambda: {}):
        t = torch.tensor([float(rank + 1)])
        dist.all_reduce(t)  # every rank of this generation takes part
        assert t.item() == world * (world + 1) / 2, (t.item(), world)
        mine = {"step": step + 1, "rank_sum": mine["rank_sum"] + t.item()}
        if not os.path.exists(config["pace_file"]):  # the test's: released, no pause
            time.sleep(config["step_sleep_s"])
        if rank == 0:
            with open(config["step_log"], "a") as f:
                f.write(f"{loop.generation} {step}\\n")
    # after StepLoop's own checkpoint: the user's is the one reported last
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = None
        if rank == 0:
            with open(os.path.join(tmp, "mine.json"), "w") as f:
                json.dump(mine, f)
            ckpt = ray.train.Checkpoint.from_directory(tmp)
        ray.train.report({"rank_sum": mine["rank_sum"]}, checkpoint=ckpt)
'''


def api_runs(api: Path) -> list[dict[str, Any]]:
    """What each run of the Ray-API loop saw at its start (rank 0's lines)."""
    if not api.exists():
        return []
    return [json.loads(line) for line in api.read_text().splitlines() if line.strip()]


def logged_steps(log: Path) -> list[tuple[int, int]]:
    """(generation, step) of every logged step."""
    if not log.exists():
        return []
    return [(int(a), int(b)) for a, b in (ln.split() for ln in log.read_text().splitlines() if ln)]


def step_counts_by_gen(log: Path) -> list[int]:
    """The generation of every logged step."""
    if not log.exists():
        return []
    return [int(ln.split()[0]) for ln in log.read_text().splitlines() if ln.strip()]


BAD_MODULES = {
    "raises": ("raise RuntimeError('no GPU driver here')\n", "no GPU driver here"),
    "exits": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "hangs": ("import time\ntime.sleep(10**6)\n", "did not finish within 15 s"),
    # imports fine, but Ray Train would refuse to call it (#42, item 2)
    "signature": ("def train_loop(config, data):\n    pass\n", "2 required positional"),
}


USER_JOBS_TRAIN = """
import lyra_ray.policies.base
import policies.mine
from lyra_ray.train import StepLoop


def train_loop(config):
    loop = StepLoop(config)
    for step in loop.steps(lambda: {}):
        if loop.rank == 0:
            with open(config["step_log"], "a") as f:
                f.write(f"{loop.generation} {step} {policies.mine.MARK} "
                        f"{policies.__file__} {lyra_ray.policies.base.__file__}\\n")
"""
