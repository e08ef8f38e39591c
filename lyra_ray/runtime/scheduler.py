"""The GlobalScheduler: a detached, named, restartable actor that loops poll -> step -> apply.

It is deliberately thin. Every decision is the core's; every Ray call is RayRuntime's.
What lives here is the loop, the durable state and the boundary: the SDK's calls
(submit / cancel / status / list) land in the SQLite inbox first, so an accepted job
survives a crash, and live-only checks (:mod:`lyra_ray.runtime.boundary`: the runtime
env, a GPU type this cluster has, enough GPUs of one type, an entrypoint that imports in
a task of its own) refuse bad input before it can reach the core.

Every method that reads or changes jobs, services or users takes the caller's lyra
token (``auth``) and checks it (:mod:`lyra_ray.runtime.auth`): any Ray client may call
any method of this actor, so the check cannot live in the SDK. A caller sees and cancels
only their own jobs unless an admin; a scheduler with no user runs open.

Order inside one cycle: fold inbox + polled events -> ``core.step`` -> persist (state
and consumed inbox rows in one transaction) -> apply. Persisting before applying means
a crash can only leave "decided but not yet done", which :meth:`RayRuntime.reconcile`
carries out on restart; never "done but forgotten", which would run a job twice.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, cast

import ray

from lyra_ray import model as m
from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR
from lyra_ray.model.errors import InputError
from lyra_ray.model.state import JobState, spec_from_dict, spec_to_dict
from lyra_ray.model.throughput import (
    CatalogueThroughputs,
    MeasuredThroughputs,
    catalogue_throughputs,
    parse_gavel_throughputs,
)
from lyra_ray.policies.base import Policy, get_policy
from lyra_ray.runtime.archive import JobArchive, describe, hand_out_terminal
from lyra_ray.runtime.auth import Users
from lyra_ray.runtime.boundary import Boundary, JobMeta, check_origin, owned
from lyra_ray.runtime.config import SchedulerConfig
from lyra_ray.runtime.faults import FaultHook
from lyra_ray.runtime.job_env import RENEW_S, UriKeeper
from lyra_ray.runtime.metrics import SchedulerMetrics, TimedPolicy
from lyra_ray.runtime.ray_runtime import RayRuntime
from lyra_ray.runtime.scheduler_views import SchedulerViews
from lyra_ray.runtime.serving import ServingPool
from lyra_ray.runtime.store import StateStore
from lyra_ray.scheduling.core import SchedulerCore, default_rounds
from lyra_ray.scheduling.waiting import WaitReason

log = logging.getLogger(__name__)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:24] or "job"


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=16)  # type: ignore[call-overload]
class GlobalScheduler(SchedulerViews):
    def __init__(self, config: dict[str, Any]) -> None:
        logging.basicConfig(level=logging.INFO)
        self.cfg = SchedulerConfig.from_dict(config)
        self.store = StateStore(self.cfg.state_dir)
        self.users = Users(self.store)
        self.jobmeta = JobMeta(self.store)
        self.keeper = UriKeeper()
        self._kept_at = 0.0
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.throughputs = MeasuredThroughputs(self._seed())
        policy = get_policy(self.cfg.policy, **self.cfg.policy_args)
        self.metrics = SchedulerMetrics() if self.cfg.metrics else None
        self.core = SchedulerCore(
            cast(Policy, TimedPolicy(policy, self.metrics.observe_solve))
            if self.metrics is not None
            else policy,
            self.throughputs,
            self.cfg.round_s,
            rounds=default_rounds(policy, min_reset_interval_s=self.cfg.min_reset_interval_s),
            min_lease_s=self.cfg.min_lease_s,
            startup_grace_s=self.cfg.startup_grace_s,
            backfill=self.cfg.backfill,
        )
        self.serving = ServingPool(
            lambda node: self.runtime.holds(node), self.cfg.serve_host, self.cfg.serve_port
        )
        self.runtime = RayRuntime(
            lambda j: self.core.jobs[j].spec,
            self.cfg.storage_path,
            self.cfg.grace_s,
            serving_hook=self.serving.apply,
            node_ready=self.serving.node_ready,
            max_restarts=self.cfg.run_restarts,
            run_options=self.jobmeta.meta,
            speeds=lambda spec, g: self.throughputs.throughput(spec, g, 1),
        )
        self.boundary = Boundary(self._gpus, self.throughputs, self.cfg.entrypoint_check_s)
        self.reasons: dict[str, str] = {}
        self.next_wakeup: float | None = None
        self.cycle_s: list[dict[str, float]] = []
        self.commits: list[dict[str, float]] = []
        """Per commit: bytes written, seconds, jobs in the state (the per-cycle write)."""
        self.archive = JobArchive(self.store)
        self.fault = FaultHook()
        self.restarts = 0
        saved = self.store.load()
        if saved is not None:
            self.core.load_state(saved["core"])
            self.runtime.load_state(saved["runtime"])
            self.serving.load_state(saved.get("serving", {}))
            self.serving.node_events([m.NodeUp(n) for n in self.core.nodes.values()])
            self.runtime.seed_nodes(self.core.nodes.values())
            self.reasons = dict(saved.get("reasons", {}))
            self.next_wakeup = self.core.next_round_s
            self.restarts = int(saved.get("restarts", 0)) + 1
            desired = {
                j.id: j.current
                for j in self.core.active()
                if j.status is m.JobStatus.RUNNING and j.current is not None
            }
            self.runtime.reconcile(desired)
            if self.metrics is not None:
                self.metrics.skip_reclaims(len(self.serving.reclaims))
            log.info("restored %d jobs (restart %d)", len(self.core.jobs), self.restarts)
        self._save([])
        self._stopped = False
        threading.Thread(target=self._loop, name="lyra-loop", daemon=True).start()

    def _seed(self) -> CatalogueThroughputs:
        """The catalogue, with the configured throughput table over it (saved, so a
        restarted scheduler that is given none decides from the same table)."""
        if self.cfg.throughputs is not None:
            self.store.save_seed(self.cfg.throughputs)
        raw = self.store.seed()
        if raw is None:
            return catalogue_throughputs()
        table = parse_gavel_throughputs(raw, "the saved throughput table")
        log.info("throughput table: %d job entries over the catalogue", len(table.alone))
        return catalogue_throughputs().overlay(table)

    # ------------------------------------------------------------------ the loop

    def _loop(self) -> None:
        """The core's loop (see :mod:`lyra_ray.scheduling.core`): fold, decide, persist, apply, then
        wait for the next event or the core's next wakeup. Events are Ray's state, which
        is polled, so the wait is at most ``period_s``; a submit or cancel wakes it."""
        while not self._stopped:
            try:
                self.cycle()
            except Exception:
                log.exception("scheduling cycle failed")
            wait = self.cfg.period_s
            if self.next_wakeup is not None:
                wait = min(wait, max(0.0, self.next_wakeup - time.time()))
            self.wake.wait(wait)
            self.wake.clear()

    def cycle(self) -> int:
        """One poll -> step -> persist -> apply; returns the number of actions."""
        with self.lock:
            c0 = time.perf_counter()
            events: list[m.Event] = []
            rows = self.store.pending()
            for _seq, kind, jid, payload in rows:
                if kind == "submit":
                    events.append(m.JobSubmitted(jid, spec_from_dict(payload)))
                elif kind == "cancel" and jid in self.core.jobs:
                    events.append(m.JobCancelled(jid))
            polled = self.runtime.poll()
            self.serving.node_events(polled)
            now = max(time.time(), self.core.now)
            events += polled + self.serving.poll(now)
            for e in events:
                if isinstance(e, m.JobFailed):
                    self.reasons[e.job_id] = e.reason
            t0 = time.perf_counter()
            self.core.fold(now, events)
            decision = self.core.decide()
            step_s = time.perf_counter() - t0
            actions = decision.actions
            self.next_wakeup = decision.next_wakeup
            hand_out_terminal(self.core, self.archive, self.runtime, self.reasons)
            if now - self._kept_at > RENEW_S / 4:  # the active jobs' code packages stay
                self._kept_at = now
                active = list(self.core.jobs) + [r[2] for r in self.store.pending()]
                self.keeper.keep(self.jobmeta.meta(j).get("runtime_env") for j in active)
            if events or actions or self.runtime.dirty or self.archive.pending:
                self._save([r[0] for r in rows])
            if actions:
                self.fault.at("after_persist")
                log.info("actions: %s", actions)
                self.runtime.apply(actions)
                self.fault.at("after_apply")
                self._save([])
            m0 = time.perf_counter()
            exported = self.metrics is not None and self.metrics.enabled
            if self.metrics is not None and self.metrics.enabled:
                self.metrics.observe_cycle(self.core, actions, m0 - c0, self.serving.metrics_view())
                self.metrics.observe_restarts(self.runtime.phases.take_fresh())
            if events:  # a cycle that had something to decide
                self.cycle_s.append(
                    {
                        "cycle_s": time.perf_counter() - c0,
                        "metrics_s": time.perf_counter() - m0,
                        "metrics": exported,
                        "step_s": step_s,
                        "events": len(events),
                        "jobs": len(self.core.active()),
                    }
                )
                del self.cycle_s[:-5000]
            return len(actions)

    def _save(self, consumed: list[int]) -> None:
        self.runtime.dirty = False
        t0 = time.perf_counter()
        archive = self.archive.rows()
        size = self.store.commit(
            {
                "core": self.core.to_state(),
                "runtime": self.runtime.to_state(),
                "serving": self.serving.to_state(),
                "reasons": self.reasons,
                "restarts": self.restarts,
            },
            consumed,
            archive,
        )
        self.commits.append(
            {
                "bytes": size,
                "commit_s": time.perf_counter() - t0,
                "jobs": len(self.core.jobs),
                "archived": len(archive),
            }
        )
        del self.commits[:-5000]
        self.archive.committed(len(archive))

    # ------------------------------------------------------------------ the boundary

    def _gpus(self, live: bool = False) -> dict[str, int]:
        with self.lock:
            if not self.runtime.inventory.nodes:
                self.runtime.inventory.refresh()
            return self.runtime.inventory.gpus_by_type(live=live)

    def check(self, raw: dict[str, Any], auth: str | None = None) -> dict[str, Any]:
        who = self.users.identify(auth)
        try:
            self.boundary.validate(owned(raw, who))
        except InputError as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True}

    def submit(
        self,
        raw: dict[str, Any],
        token: str | None = None,
        auth: str | None = None,
        origin: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Queue a job; ``token`` makes a retried call idempotent, ``auth`` is the
        caller's lyra token, ``origin`` names the Ray job that submitted it."""
        who = self.users.identify(auth)
        try:
            meta = check_origin(origin)
            ok = self.boundary.validate(owned(raw, who))
        except InputError as e:
            return {"ok": False, "error": str(e)}
        meta.update(ok.meta)
        seq = self.store.next_seq("job_seq")
        jid = f"{_slug(ok.spec.name)}-{seq:04d}-{uuid.uuid4().hex[:4]}"
        got = self.store.enqueue(
            "submit", jid, spec_to_dict(ok.spec), token, meta=meta, owner=who.name
        )
        if got == jid:
            self.jobmeta.put(jid, who.name, meta)
            self.keeper.keep([meta.get("runtime_env")])
        self.wake.set()
        return {"ok": True, "job_id": got}

    def cancel(self, job_id: str, auth: str | None = None) -> dict[str, Any]:
        who = self.users.identify(auth)
        if not isinstance(job_id, str):
            return {"ok": False, "error": f"field 'job_id': expected a string, got {job_id!r}"}
        with self.lock:
            known = (
                job_id in self.core.jobs
                or self.archive.get(job_id) is not None
                or any(r[2] == job_id for r in self.store.pending())
            )
        if not known or not self.jobmeta.may_access(job_id, who):
            hint = "" if who.admin else " (a user sees only their own jobs)"
            return {"ok": False, "error": f"field 'job_id': unknown job {job_id!r}{hint}"}
        self.store.enqueue("cancel", job_id, {})
        self.wake.set()
        return {"ok": True, "job_id": job_id}

    def status(self, job_id: str, auth: str | None = None) -> dict[str, Any] | None:
        who = self.users.identify(auth)
        if not isinstance(job_id, str):
            return None
        row = self._status(job_id)
        if row is None or not self.jobmeta.may_access(job_id, who):
            return None  # another user's job is as unknown as a missing one
        return self.jobmeta.decorate(row)

    def _status(self, job_id: str) -> dict[str, Any] | None:
        with self.lock:
            j = self.core.jobs.get(job_id)
            if j is None:
                done = self.archive.get(job_id)
                if done is not None:
                    return done
                pending = [r for r in self.store.pending() if r[2] == job_id]
                if not pending:
                    return None
                spec = pending[0][3]
                return {  # accepted, not yet in the core: the fields a queued job has
                    "id": job_id,
                    "name": spec.get("name"),
                    "user": spec.get("user"),
                    "status": "submitted",
                    "assignment": None,
                    "steps_done": 0.0,
                    "total_steps": spec.get("total_steps"),
                    "generation": 0,
                    "reason": "accepted; the scheduler takes it in at its next cycle",
                    "reason_code": "submitted",
                }
            return self._describe(j, self.core.wait_reasons())

    def _all_jobs(self) -> list[dict[str, Any]]:
        """Every job, active and archived, sorted by id (``list`` and ``overview``)."""
        waits = self.core.wait_reasons()
        rows = [self._describe(j, waits) for j in self.core.jobs.values()]
        rows += self.archive.records()
        return sorted(rows, key=lambda r: str(r["id"]))

    def _describe(self, j: JobState, waits: Mapping[str, WaitReason]) -> dict[str, Any]:
        gen = self.runtime.generations.get(j.id, 0)
        row = describe(j, self.core.now, gen, self.reasons.get(j.id))
        wait = waits.get(j.id)
        if wait is not None:  # why it waits: a stable code and a sentence
            row["reason"], row["reason_code"] = wait.message, wait.code
        last = self.runtime.phases.last(j.id)
        if last is not None:  # where its last resize or preemption spent its time
            row["last_restart"] = last
        return row

    def list(self, auth: str | None = None) -> list[dict[str, Any]]:
        """Every job the caller may see (all for an admin), the archived ones too."""
        who = self.users.identify(auth)
        with self.lock:
            return self.jobmeta.visible(self._all_jobs(), who)


def start_scheduler(config: Mapping[str, Any] | None = None) -> Any:
    """Create (or find) the detached scheduler actor on the head node; wait until ready."""
    cfg = SchedulerConfig.from_dict(config)
    actor = GlobalScheduler.options(  # type: ignore[attr-defined]
        name=SCHEDULER_ACTOR,
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        resources={"node:__internal_head__": 0.001},
    ).remote(asdict(cfg))
    ray.get(actor.ping.remote())
    return actor
