"""The GlobalScheduler: a detached, named, restartable actor that loops poll -> step -> apply.

It is deliberately thin. Every decision is the core's; every Ray call is RayRuntime's.
What lives here is the loop, the durable state and the boundary: the SDK's calls
(submit / cancel / status / list) land in the SQLite inbox first, so an accepted job
survives a crash, and live-only checks (importable entrypoint, a GPU type this cluster
has, enough GPUs of one type) refuse bad input before it can reach the core.

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
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import parse_job_spec
from lyra_ray.model.state import JobState, spec_from_dict, spec_to_dict
from lyra_ray.model.throughput import MeasuredThroughputs, catalogue_throughputs
from lyra_ray.runtime.archive import JobArchive, describe, hand_out_terminal
from lyra_ray.runtime.config import SchedulerConfig
from lyra_ray.runtime.faults import FaultHook
from lyra_ray.runtime.metrics import SchedulerMetrics, TimedPolicy
from lyra_ray.runtime.names import NAMESPACE, SCHEDULER_ACTOR
from lyra_ray.runtime.ray_runtime import RayRuntime
from lyra_ray.runtime.runs import load_entrypoint
from lyra_ray.runtime.serving import ServingPool
from lyra_ray.runtime.store import StateStore
from lyra_ray.scheduling.core import SchedulerCore, default_rounds
from lyra_ray.serving.spec import parse_service_spec
from policies.base import Policy, get_policy

log = logging.getLogger(__name__)


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:24] or "job"


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=16)  # type: ignore[call-overload]
class GlobalScheduler:
    def __init__(self, config: dict[str, Any]) -> None:
        logging.basicConfig(level=logging.INFO)
        self.cfg = SchedulerConfig.from_dict(config)
        self.store = StateStore(self.cfg.state_dir)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.throughputs = MeasuredThroughputs(catalogue_throughputs())
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
        )
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

    def validate(self, raw: Mapping[str, Any]) -> m.JobSpec:
        """Parse + the checks only a live cluster can make; raises InputError."""
        name = raw.get("name") if isinstance(raw, Mapping) else None
        source = f"job {name!r}" if name else "job"
        with self.lock:
            if not self.runtime.inventory.nodes:
                self.runtime.inventory.refresh()
            gpus = self.runtime.inventory.gpus_by_type()
        try:
            return self._validate(raw, source, gpus)
        except InputError:
            # The view is as old as the last cycle: a node that joined since (or one the
            # job needs that came back) must not get the job refused. Ask Ray, once.
            fresh = self.runtime.inventory.gpus_by_type(live=True)
            if fresh == gpus:
                raise
            return self._validate(raw, source, fresh)

    def _validate(self, raw: Mapping[str, Any], source: str, gpus: dict[str, int]) -> m.JobSpec:
        spec = parse_job_spec(
            raw,
            source=source,
            known_gpu_types=list(gpus),
            known_job_types=sorted(getattr(self.throughputs.seed, "job_types", ())) or None,
        )
        if spec.entrypoint is None:
            raise InputError(f"{source}: field 'entrypoint': required to run on the cluster")
        try:
            load_entrypoint(spec.entrypoint)
        except Exception as e:
            raise InputError(
                f"{source}: field 'entrypoint': cannot import {spec.entrypoint!r}: {e}"
            ) from None
        need = spec.min_workers  # a planned model may not fit on fewer GPUs than it asks for
        usable = {g: n for g, n in gpus.items() if self.throughputs.throughput(spec, g, need) > 0}
        biggest = max(usable.values(), default=0)
        if spec.min_workers > biggest:
            field = "workers" if not spec.elastic else "min_workers"
            raise InputError(
                f"{source}: field '{field}': needs {spec.min_workers} GPUs of one type; "
                f"this cluster has at most {biggest} of a type the job can use ({usable})"
            )
        return spec

    def check(self, raw: dict[str, Any]) -> dict[str, Any]:
        try:
            self.validate(raw)
        except InputError as e:
            return {"ok": False, "error": str(e)}
        return {"ok": True}

    def submit(self, raw: dict[str, Any], token: str | None = None) -> dict[str, Any]:
        try:
            spec = self.validate(raw)
        except InputError as e:
            return {"ok": False, "error": str(e)}
        seq = self.store.next_seq("job_seq")
        jid = f"{_slug(spec.name)}-{seq:04d}-{uuid.uuid4().hex[:4]}"
        jid = self.store.enqueue("submit", jid, spec_to_dict(spec), token)
        self.wake.set()
        return {"ok": True, "job_id": jid}

    def cancel(self, job_id: str) -> dict[str, Any]:
        if not isinstance(job_id, str):
            return {"ok": False, "error": f"field 'job_id': expected a string, got {job_id!r}"}
        with self.lock:
            known = (
                job_id in self.core.jobs
                or self.archive.get(job_id) is not None
                or any(r[2] == job_id for r in self.store.pending())
            )
        if not known:
            return {"ok": False, "error": f"field 'job_id': unknown job {job_id!r}"}
        self.store.enqueue("cancel", job_id, {})
        self.wake.set()
        return {"ok": True, "job_id": job_id}

    def status(self, job_id: str) -> dict[str, Any] | None:
        if not isinstance(job_id, str):
            return None
        with self.lock:
            j = self.core.jobs.get(job_id)
            if j is None:
                done = self.archive.get(job_id)
                if done is not None:
                    return done
                pending = [r for r in self.store.pending() if r[2] == job_id]
                if not pending:
                    return None
                return {"id": job_id, "name": pending[0][3].get("name"), "status": "submitted"}
            return self._describe(j)

    def _all_jobs(self) -> list[dict[str, Any]]:
        """Every job, active and archived, sorted by id (``list`` and ``overview``)."""
        rows = [self._describe(j) for j in self.core.jobs.values()] + self.archive.records()
        return sorted(rows, key=lambda r: str(r["id"]))

    def _describe(self, j: JobState) -> dict[str, Any]:
        gen = self.runtime.generations.get(j.id, 0)
        return describe(j, self.core.now, gen, self.reasons.get(j.id))

    # ------------------------------------------------------------------ introspection

    def ping(self) -> dict[str, Any]:
        return {"restarts": self.restarts, "config": asdict(self.cfg)}

    def deploy_service(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Register and deploy an inference service; refused whole, naming the field."""
        try:
            spec = parse_service_spec(raw)
            deadline = time.monotonic() + 3 * self.cfg.period_s + 5.0
            while not self.serving.nodes and time.monotonic() < deadline:
                self.wake.set()  # the next cycle reads the inventory
                time.sleep(0.2)
            with self.lock:
                url = self.serving.deploy(spec)
                self._save([])
        except InputError as e:
            return {"ok": False, "error": str(e)}
        self.wake.set()
        return {"ok": True, "service": spec.name, "url": url}

    def remove_service(self, name: str) -> dict[str, Any]:
        try:
            with self.lock:
                self.serving.remove(name)
                self._save([])
        except InputError as e:
            return {"ok": False, "error": str(e)}
        self.wake.set()
        return {"ok": True, "service": name}

    def overview(self) -> dict[str, Any]:
        """Everything ``lyra status`` shows: servers with their state, jobs, serving."""
        with self.lock:
            serving = self.serving.describe()
            nodes = []
            for n in sorted(self.core.nodes.values(), key=lambda n: (n.pool, n.gpu_type, n.id)):
                if n.pool == "inference":
                    state = serving["servers"].get(n.id, "serving")
                else:
                    state = "training"
                nodes.append(
                    {
                        "id": n.id,
                        "gpu_type": n.gpu_type,
                        "pool": n.pool,
                        "gpus": n.num_gpus,
                        "state": state,
                    }
                )
            jobs = self._all_jobs()
            rounds = {
                "policy": self.cfg.policy,
                "round_s": self.core.round_s,
                "rounds_done": self.core.rounds.rounds_done,
                "next_round_s": self.core.next_round_s,
                "now": self.core.now,
            }
            return {"nodes": nodes, "jobs": jobs, "serving": serving, "rounds": rounds}

    def nodes(self) -> list[dict[str, Any]]:
        with self.lock:
            return [asdict(n) for n in self.runtime.inventory.nodes.values()]

    def launches(self) -> list[tuple[float, str, int, dict[str, Any]]]:
        with self.lock:
            return sorted(self.runtime.launches + self.archive.launches(), key=lambda x: x[0])

    def runs(self) -> dict[str, dict[str, Any]]:
        """The control records: per job its latest run's steps and workers' node labels."""
        return self.runtime.worker_placements()

    def history(self) -> list[dict[str, Any]]:
        """Every worker's own report of its node and labels, for all runs."""
        out: list[dict[str, Any]] = ray.get(self.runtime.control.history.remote())
        return out

    def stats(self) -> dict[str, Any]:
        with self.lock:
            return {
                "cycle_s": list(self.cycle_s),
                "commits": list(self.commits),
                "gaps": list(self.runtime.gaps),
                "cycles": self.core.cycles,
                "restarts": self.restarts,
                "jobs_in_state": len(self.core.jobs),
                "archived": self.archive.count(),
            }

    def inject_fault(self, point: str) -> dict[str, Any]:
        """Test-only: crash at ``point`` of the next cycle with actions
        (:mod:`lyra_ray.runtime.faults`); refused unless the cluster allows it."""
        return self.fault.arm(point)

    def set_metrics_export(self, enabled: bool) -> bool:
        """Turn metric export off or back on without a restart (policy solve times are
        still timed); returns whether it is on. A scheduler started with
        ``metrics: false`` has no metrics to turn on."""
        if self.metrics is not None:
            self.metrics.enabled = bool(enabled)
        return self.metrics is not None and self.metrics.enabled

    def shutdown(self) -> None:
        self._stopped = True
        self.wake.set()

    def list(self) -> list[dict[str, Any]]:  # last: the name shadows `list` in the class
        """Every job, the archived ones too."""
        with self.lock:
            return self._all_jobs()


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
