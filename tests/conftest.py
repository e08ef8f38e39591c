"""Hypothesis draws the same examples on every run unless asked for new ones.

WHY: ``make test`` gates every landing, and a property test that draws fresh random
instances each run can fail on one no change caused (a water-filling example once
failed only because the cvxpy *reference* froze too early). Exploring stays one
variable away: ``LYRA_HYPOTHESIS_RANDOM=1 make test-unit`` draws new examples and keeps
failing ones in ``.hypothesis/`` (ignored by git) to replay them.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
"""Set in each of ``make test``'s two processes (pytest-xdist: ``gw0``, ``gw1``)."""
if WORKER:
    # WHY a Ray temp dir per process: Ray resolves the address "auto" (a ``ray job
    # submit`` driver always gets it: Ray's job supervisor sets RAY_ADDRESS=auto, and
    # its State API and Ray Train's placement-group cleaner fall back to it) to the
    # *latest* cluster recorded in ``$RAY_TMPDIR/ray/ray_current_cluster`` whenever more
    # than one GCS runs on the host. Two test processes sharing one temp dir reached each
    # other's clusters so: a ``lyra submit`` run by ``ray job submit`` submitted to the
    # other process's scheduler, and a Ray Train run never stepped again (three failures
    # in the first trial of two processes). A cluster of its own per process, as two
    # users on one host would need.
    os.environ["RAY_TMPDIR"] = f"{os.environ.get('RAY_TMPDIR', '/tmp/ray-lyra')}-{WORKER}"

settings.register_profile("lyra-ci", derandomize=True, database=None)
settings.register_profile("lyra-explore", derandomize=False)
settings.load_profile(
    "lyra-explore" if os.environ.get("LYRA_HYPOTHESIS_RANDOM") == "1" else "lyra-ci"
)


@pytest.fixture(scope="module", autouse=True)
def _ray_session_ends_with_its_module() -> Iterator[None]:
    """No Ray driver session outlives the module that made it.

    WHY: each live module starts its own cluster and connects to it; a module whose
    connection outlived it (its own teardown skipped, or a client thread that connected
    again after the cluster stopped) made the next module's ``ray.init`` fail with
    "Maybe you called ray.init twice by accident?". In the usual order no module does;
    run two to a process in another order (``pytest -n 2 --dist loadfile``), 16 tests of
    two modules errored so. Isolation belongs to the tests, so the guard is here, not in
    ``start_embedded`` (a user's process connected elsewhere is refused as Ray refuses
    it). Ray is looked at only when a test imported it: unit modules pay nothing.
    """
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        from lyra_ray.ops.embedded import disconnect

        disconnect()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed live test's report ends with the scheduler actor's log tail, the run
    control records, and every node its cluster lost with its raylet's last lines.

    WHY: see ``tests/actor_logs.py``; read while the test's cluster is still up (its
    module's fixture tears it down later), only when the test connected to Ray.
    """
    outcome = yield
    report = outcome.get_result()
    ray = sys.modules.get("ray")
    if not report.failed or ray is None or not ray.is_initialized():
        return
    try:
        from ray._private import worker

        logs = Path(worker._global_node.get_logs_dir_path())
    except Exception:  # a report is never lost to its own add-on
        return
    from tests.actor_logs import actor_log_tails

    tail = actor_log_tails(logs, "GlobalScheduler")
    if tail:
        report.sections.append(("scheduler actor log (tail)", tail))
    records = _control_records(ray)
    if records:
        report.sections.append(("run control records", records))
    from tests.lost_nodes import lost_nodes_report

    try:
        lost = lost_nodes_report(ray.nodes(), logs)
    except Exception:  # the cluster going: the report stays as is
        lost = ""
    if lost:
        report.sections.append(("ray nodes lost", lost))


def _control_records(ray: Any) -> str:
    """The control actor's record of every run (asked to stop, stop seen, steps,
    outcome), as JSON; ``""`` when there is none to read. WHY: a test once waited in
    vain for a resize's stop to be seen, and the scheduler's log could not tell whether
    the stop had been asked (docs/testing.md)."""
    try:
        from lyra_ray.contract.names import CONTROL_ACTOR, NAMESPACE

        control = ray.get_actor(CONTROL_ACTOR, namespace=NAMESPACE)
        records = ray.get(control.snapshot.remote(), timeout=10)
    except Exception:  # no control actor, or the cluster going: the report stays as is
        return ""
    return json.dumps(records, indent=1, sort_keys=True, default=str)[:8000]


RECORDED = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "suite_times.json"
LIVE_DEFAULT_S = 60.0
"""A live module with no recorded time yet (new) counts as a short live one."""


def _recorded_seconds() -> dict[str, float]:
    """Each module's seconds in the newest recorded whole run that passed (else the
    newest: ``benchmarks._suite_table.newest_passed``); empty if unreadable."""
    from benchmarks._suite_table import newest_passed

    try:
        runs = json.loads(RECORDED.read_text())["runs"]
        return {m: float(v["seconds"]) for m, v in newest_passed(runs)["modules"].items()}
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With two processes, the longest modules are handed out first.

    WHY: ``make test`` runs the modules in two processes (pytest-xdist, one module to a
    process at a time: ``--dist loadfile``), which take the next module in collection
    order as they finish one. In path order the live modules came first and a long one
    could start last, leaving one process running it alone while the other had nothing
    left; longest first (the newest recorded run's times, ``benchmarks/suite_times.py``)
    ends both at about the same moment, the many short unit modules filling the gaps.
    Within a module the order is unchanged; serially (no xdist) nothing moves.
    """
    if not WORKER:
        return
    seconds = _recorded_seconds()
    root = Path(str(config.rootpath))

    def weight(item: pytest.Item) -> float:
        path = Path(str(item.path))
        rel = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        live = rel.startswith(("tests/ray/", "tests/chaos/"))
        return seconds.get(rel, LIVE_DEFAULT_S if live else 0.0)

    items.sort(key=lambda item: -weight(item))  # stable: a module's tests stay in order


_EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the test process with pytest's own status, after its exit handlers, without
    the interpreter's finalization.

    WHY: twice in about ten whole runs (2f31a55, f34f90d), every test passed, the summary
    and build/junit.xml were written, and then the process died of SIGSEGV, so
    ``make test`` failed with status 139. Python's fault handler printed nothing, so the
    crash came after finalization had turned it off, while modules and the objects of C
    extensions (Ray's core worker, gRPC's threads; the suite starts and stops some twenty
    Ray clusters in this one process) were being torn down. Which extension crashes is
    not known. The exit handlers (Ray's own shutdown among them) still run here, where
    the fault handler would report a crash in them; only the teardown after them is
    skipped. Pytest's status is kept, failures included.
    """
    import atexit

    status = config.stash.get(_EXIT_STATUS, None)
    if status is None or "ray" not in sys.modules:
        return  # not a whole session, or no Ray in it: exit as usual
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
