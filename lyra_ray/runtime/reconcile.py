"""After a scheduler restart: make the runs match what the core believes.

A restarted scheduler loads its runs table from the store, while the runs themselves
kept going (or ended, or were started after the last commit) in the meantime. This
module carries out the core's current decisions against that reality — it never takes
new ones: runs the core still wants keep going untouched, a run whose job the core no
longer runs is stopped, and a job the core runs that has no live run is started again
from its newest checkpoint. It acts only through the runtime's own verbs (``start``,
``stop``, ``kill``), so the runs table keeps one owner.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import ray

from lyra_ray import model as m
from lyra_ray.model.state import assignment_to_dict
from lyra_ray.runtime import runs
from lyra_ray.runtime.run_record import RunRecord

if TYPE_CHECKING:
    from lyra_ray.runtime.ray_runtime import RayRuntime

log = logging.getLogger(__name__)


def reconcile(rt: RayRuntime, desired: Mapping[str, m.Assignment]) -> None:
    """Make ``rt``'s runs match ``desired`` (the core's assignments after a restore);
    ``rt``'s inventory has just been refreshed, so a node gone meanwhile is known."""
    alive_nodes = set(rt.inventory.nodes)
    records: dict[str, dict[str, Any]] = ray.get(rt.control.snapshot.remote())
    adopt_unrecorded(rt, desired, records)
    for jid, r in list(rt.runs.items()):
        rec = records.get(jid)
        alive = runs.run_alive(jid, r.generation, r.executor)
        finished = rec is not None and rec["generation"] == r.generation and rec["outcome"]
        if not alive and not finished:
            log.info("reconcile: run %s g%d is gone", jid, r.generation)
            del rt.runs[jid]
        elif jid not in desired and r.phase == "running":
            rt.stop(jid, None)
    for jid, a in desired.items():
        if any(n not in alive_nodes for n, _ in a.nodes):
            continue  # its node is gone: the pending NodeDown re-queues the job
        want = assignment_to_dict(a)
        cur = rt.runs.get(jid)
        if cur is None:
            log.info("reconcile: starting %s again", jid)
            assert want is not None
            rt.start(jid, want)
        elif cur.phase == "running" and cur.assignment != want:
            rt.stop(jid, want)
        elif cur.phase == "stopping":
            cur.next_assignment = want
    rt.dirty = True


def adopt_unrecorded(
    rt: RayRuntime, desired: Mapping[str, m.Assignment], records: Mapping[str, Mapping[str, Any]]
) -> None:
    """Runs started after the last commit: adopt them, never start their generation again.

    The scheduler commits the runs table after applying a cycle's actions; one that
    died in between (a run started, the commit not yet made) restarts with a table
    that lacks the run, while the control actor already has its generation
    (``start_run`` registers it first). Without this, reconcile started the same
    generation a second time (found by the fault hook's ``after_apply``,
    ``tests/chaos``). A run the core still wants is adopted as running (poll then
    sees it progress, end, or vanish); one it no longer wants is killed.
    """
    for jid, rec in records.items():
        gen = int(rec["generation"])
        if gen <= rt.trail.generation(jid) or (jid not in desired and jid not in rt.runs):
            continue
        log.warning("reconcile: adopting %s g%d, started after the last commit", jid, gen)
        rt.trail.take(jid, gen)
        old = rt.runs.pop(jid, None)
        if old is not None:
            rt.kill(old)  # the adopted run replaced it
        want = assignment_to_dict(desired[jid]) if jid in desired else None
        if want is None:
            runs.kill_run(jid, gen, rt.executor)
            continue
        now = time.time()
        rt.runs[jid] = RunRecord(jid, gen, want, now, executor=rt.executor)
        rt.trail.adopted(now, jid, gen, want)
        rt.dirty = True
