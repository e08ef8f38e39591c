"""An embedded cluster for a benchmark, its workdir a temporary directory removed after.

WHY here and not in ``lyra_ray.ops.embedded``: a cluster's workdir holds its scheduler
state and checkpoints, which the product never deletes (they are its user's). A
benchmark's are its own and throwaway; left behind, runs of ``resize_phases.py`` with
200 MB states kept 4-5 GB each in /tmp.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from lyra_ray.ops.embedded import EmbeddedCluster, embedded_cluster


@contextmanager
def scratch_cluster(
    training: Sequence[tuple[str, int]], inference: Sequence[tuple[str, int]] = ()
) -> Iterator[EmbeddedCluster]:
    with (
        tempfile.TemporaryDirectory(prefix="lyra-bench-") as d,
        embedded_cluster(training, inference, Path(d)) as live,
    ):
        yield live
