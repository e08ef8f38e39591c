"""Whether a process keeps its ``working_dir`` while another node sets the same one up.

WHY a probe of its own: the nodes of a one-host cluster (the embedded cluster's, ``lyra
up --local``'s) once shared one runtime-env directory, and Ray unpacks a ``working_dir``
anew on each node that first needs it, over the copy already there: a process of another
node running in it lost its cwd. Used by the embedded cluster's test
(``test_live_scheduler``) and by ``lyra up --local``'s (``tests/chaos/restart_driver``),
on a driver already connected to the cluster.
"""

from __future__ import annotations

from pathlib import Path

FILE = "weights.txt"
TEXT = "the team's weights"


def reads_across_nodes(folder: Path, here: str, there: str) -> list[str]:
    """Write :data:`FILE` into ``folder`` and upload it as a ``working_dir``; an actor on
    node ``here`` reads the file, a task on node ``there`` (same working_dir) reads it,
    and the actor reads it again. Returns the three reads; the last raises (a
    FileNotFoundError inside a RayTaskError) where the task's set-up took the actor's
    directory away."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from lyra_ray.client.user_env import upload

    folder.mkdir(parents=True, exist_ok=True)
    (folder / FILE).write_text(TEXT)
    env = upload({"working_dir": str(folder)})

    @ray.remote(num_cpus=0)
    class Reader:
        def read(self) -> str:
            return Path(FILE).read_text()

    @ray.remote(num_cpus=0)
    def read_once() -> str:
        return Path(FILE).read_text()

    def on(node: str) -> NodeAffinitySchedulingStrategy:
        return NodeAffinitySchedulingStrategy(node, soft=False)

    reader = Reader.options(runtime_env=env, scheduling_strategy=on(here)).remote()
    try:
        reads = [ray.get(reader.read.remote(), timeout=120)]
        task = read_once.options(runtime_env=env, scheduling_strategy=on(there))
        reads.append(ray.get(task.remote(), timeout=120))
        reads.append(ray.get(reader.read.remote(), timeout=60))
        return reads
    finally:
        ray.kill(reader)
