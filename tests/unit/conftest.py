"""The unit tier never starts Ray by accident.

WHY: a Ray call made without ``ray.init`` (``ray.get``, ``.remote``, an actor's
``options(...).remote()``) makes Ray start a whole local cluster (its auto-init). Two
unit tests reached it through the runtime's constructor and a stop request: each
started Ray's processes inside ``make test-unit``, and hung in ``Node._init_gcs_client``
when an interrupted live run had left ``$RAY_TMPDIR/ray/ray_current_cluster`` pointing
at a dead GCS (docs/testing.md). With auto-init off, such a call fails at once with
Ray's own "Ray has not been started yet", naming the test to mend. A test that wants
Ray starts it itself (``ray.init``, ``ray.cluster_utils.Cluster``), which this leaves
alone.
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_ray_auto_init(monkeypatch: pytest.MonkeyPatch) -> None:
    from ray._private import auto_init_hook

    monkeypatch.setattr(auto_init_hook, "enable_auto_connect", False)
