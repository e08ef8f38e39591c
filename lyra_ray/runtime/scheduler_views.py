"""The scheduler's views and admin operations: status views, services, users, test hooks.

A member of :class:`lyra_ray.runtime.scheduler.GlobalScheduler`, whose actor methods
call it; it holds the services it reads and never writes another's fields: changes go
through their owners (the serving pool deploys, the loop's store commits, the clock
stops).

Every method takes the caller's lyra token (``auth``): what lists jobs shows only the
caller's own unless they are an admin; what changes the cluster for everyone (services,
users, metrics export, fault injection, ``shutdown``) is for admins. ``ping`` and
``whoami`` need no identity (a health check; "who am I" answers any caller).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

import ray

from lyra_ray.model.errors import InputError
from lyra_ray.runtime.serving_views import moe_plans
from lyra_ray.serving.spec import parse_service_spec

if TYPE_CHECKING:
    from lyra_ray.runtime.archive import JobArchive
    from lyra_ray.runtime.auth import Identity, Users
    from lyra_ray.runtime.config import SchedulerConfig
    from lyra_ray.runtime.cycle import CycleStats, LiveStore, WallClock
    from lyra_ray.runtime.desk import JobDesk
    from lyra_ray.runtime.faults import FaultHook
    from lyra_ray.runtime.metrics import SchedulerMetrics
    from lyra_ray.runtime.ray_runtime import RayRuntime
    from lyra_ray.runtime.serving import ServingPool
    from lyra_ray.scheduling.core import SchedulerCore


class SchedulerViews:
    def __init__(
        self,
        cfg: SchedulerConfig,
        core: SchedulerCore,
        runtime: RayRuntime,
        serving: ServingPool,
        desk: JobDesk,
        live: LiveStore,
        stats: CycleStats,
        clock: WallClock,
        users: Users,
        metrics: SchedulerMetrics | None,
        lock: threading.RLock,
        wake: threading.Event,
    ) -> None:
        self.cfg, self.core, self.runtime, self.serving = cfg, core, runtime, serving
        self.desk, self.live, self.cycle_stats, self.clock = desk, live, stats, clock
        self.users, self.metrics, self.lock, self.wake = users, metrics, lock, wake
        self.fault: FaultHook = live.fault
        self.archive: JobArchive = live.archive

    def _save(self) -> None:
        self.live.save(self.core, [])

    def _mine(self, job_id: str, who: Identity) -> bool:
        return who.may_touch(self.desk.jobmeta.owner(job_id))

    # ------------------------------------------------------------------ anyone

    def ping(self, auth: str | None = None) -> dict[str, Any]:
        return {
            "restarts": self.live.restarts,
            "restored": self.live.restored,
            "config": asdict(self.cfg),
            "identities": self.users.enabled,
        }

    def whoami(self, auth: str | None = None) -> dict[str, Any]:
        """The caller's identity (raises AuthError for a missing or wrong token)."""
        who = self.users.identify(auth)
        return {"name": who.name, "admin": who.admin, "identities": self.users.enabled}

    # ------------------------------------------------------------------ views

    def overview(self, auth: str | None = None) -> dict[str, Any]:
        """Everything ``lyra status`` shows: servers with their state, jobs, serving."""
        who = self.desk.identify(auth)  # with their team: teammates see each other's jobs
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
            jobs = self.desk.jobmeta.visible(self.desk.all_jobs(), who)
            rounds = {
                "policy": self.cfg.policy,
                "round_s": self.core.round_s,
                "rounds_done": self.core.rounds.rounds_done,
                "next_round_s": self.core.next_round_s,
                "now": self.core.now,
            }
        moe = [svc for svc in serving["services"] if svc["model"] == "moe"]
        plans = moe_plans(self.serving, [svc["name"] for svc in moe])  # outside the lock
        for svc in moe:
            svc["plan"] = plans[svc["name"]]
        return {"nodes": nodes, "jobs": jobs, "serving": serving, "rounds": rounds}

    def nodes(self, auth: str | None = None) -> list[dict[str, Any]]:
        self.users.identify(auth)
        with self.lock:
            return [asdict(n) for n in self.runtime.inventory.nodes.values()]

    def launches(self, auth: str | None = None) -> list[tuple[float, str, int, dict[str, Any]]]:
        """(time, job, generation, assignment) of every run the caller may see."""
        who = self.users.identify(auth)
        with self.lock:
            rows = sorted(self.runtime.trail.launches + self.archive.launches(), key=lambda x: x[0])
        return [r for r in rows if self._mine(r[1], who)]

    def runs(self, auth: str | None = None) -> dict[str, dict[str, Any]]:
        """The control records: per job its latest run's steps and workers' node labels."""
        who = self.users.identify(auth)
        records: dict[str, dict[str, Any]] = ray.get(self.runtime.control.snapshot.remote())
        return {j: r for j, r in records.items() if self._mine(j, who)}

    def history(self, auth: str | None = None) -> list[dict[str, Any]]:
        """Every worker's own report of its node and labels, for all runs."""
        who = self.users.identify(auth)
        out: list[dict[str, Any]] = ray.get(self.runtime.control.history.remote())
        return [p for p in out if self._mine(str(p.get("job_id")), who)]

    def stats(self, auth: str | None = None) -> dict[str, Any]:
        self.users.require_admin(auth, "the scheduler's statistics")
        with self.lock:
            return {
                "cycle_s": list(self.cycle_stats.cycle_s),
                "commits": list(self.live.commits),
                "gaps": list(self.runtime.trail.gaps),
                "restart_phases": list(self.runtime.phases.done),
                "cycles": self.core.cycles,
                "restarts": self.live.restarts,
                "jobs_in_state": len(self.core.jobs),
                "archived": self.archive.count(),
            }

    # ------------------------------------------------------------------ services (admins)

    def deploy_service(self, raw: dict[str, Any], auth: str | None = None) -> dict[str, Any]:
        """Register and deploy an inference service; refused whole, naming the field."""
        reply = self.deploy_services([raw], auth)
        if not reply["ok"]:
            return reply
        (one,) = reply["services"]
        return {"ok": True, **one}

    def deploy_services(
        self, raws: list[dict[str, Any]], auth: str | None = None
    ) -> dict[str, Any]:
        """Deploy several services (a Serve config's applications): every one is checked,
        its application imported and built, before any is deployed; one refusal deploys
        none. The reply carries each one's URL and the line saying what its copies run."""
        from lyra_ray.runtime.app_check import check_app
        from lyra_ray.serving.copy_plan import app_target

        self.users.require_admin(auth, "deploying a service")
        try:
            if not isinstance(raws, list) or not raws:
                raise InputError("services: expected a non-empty list of services")
            specs = [parse_service_spec(raw) for raw in raws]
            names = [s.name for s in specs]
            if len(set(names)) < len(names):
                raise InputError(f"services: field 'name': {names} repeats a name")
            deadline = time.monotonic() + 3 * self.cfg.period_s + 5.0
            while not self.serving.nodes and time.monotonic() < deadline:
                self.wake.set()  # the next cycle reads the inventory
                time.sleep(0.2)
            with self.lock:  # the cheap checks first: routes, room on the servers
                for spec in specs:
                    self.serving.check(spec, None, specs)
            # Serve's first start takes a minute on a loaded host: not under the lock
            # every view and the cycle take (the checks below then see its routes)
            self.serving.proxy.start()
            checked = []
            for raw, spec in zip(raws, specs, strict=True):
                shape = check_app(spec, self.cfg.entrypoint_check_s) if spec.app else None
                own = "target_ongoing_per_replica" in raw
                target = app_target(shape) if shape is not None else None
                if not own and target is not None:
                    spec = replace(spec, target_ongoing_per_replica=target)
                checked.append((spec, shape, own))
            with self.lock:
                batch = [spec for spec, _, _ in checked]
                for spec, shape, _ in checked:
                    self.serving.check(spec, shape, batch)
                out = []
                for spec, shape, own in checked:
                    url, note = self.serving.deploy(spec, shape, own)
                    out.append({"service": spec.name, "url": url, "note": note})
                self._save()
        except InputError as e:
            return {"ok": False, "error": str(e)}
        self.wake.set()
        return {"ok": True, "services": out}

    def remove_service(self, name: str, auth: str | None = None) -> dict[str, Any]:
        self.users.require_admin(auth, "removing a service")
        try:
            with self.lock:
                self.serving.remove(name)
                self._save()
        except InputError as e:
            return {"ok": False, "error": str(e)}
        self.wake.set()
        return {"ok": True, "service": name}

    # ------------------------------------------------------------------ users (admins)

    def user_add(self, name: str, admin: bool = False, auth: str | None = None) -> dict[str, Any]:
        """Create a user; the reply holds its token, which lyra never shows again."""
        try:
            return {"ok": True, **self.users.add(name, admin, auth)}
        except InputError as e:
            return {"ok": False, "error": str(e)}

    def user_token(self, name: str, auth: str | None = None) -> dict[str, Any]:
        try:
            return {"ok": True, **self.users.issue(name, auth)}
        except InputError as e:
            return {"ok": False, "error": str(e)}

    def user_remove(self, name: str, auth: str | None = None) -> dict[str, Any]:
        try:
            return {"ok": True, **self.users.remove(name, auth)}
        except InputError as e:
            return {"ok": False, "error": str(e)}

    def user_list(self, auth: str | None = None) -> list[dict[str, Any]]:
        return self.users.list(auth)

    # ------------------------------------------------------------------ operations (admins)

    def inject_fault(self, point: str, auth: str | None = None) -> dict[str, Any]:
        """Test-only: crash at ``point`` of the next cycle with actions
        (:mod:`lyra_ray.runtime.faults`); refused unless the cluster allows it."""
        self.users.require_admin(auth, "fault injection")
        return self.fault.arm(point)

    def set_metrics_export(self, enabled: bool, auth: str | None = None) -> bool:
        """Turn metric export off or back on without a restart (policy solve times are
        still timed); returns whether it is on. A scheduler started with
        ``metrics: false`` has no metrics to turn on."""
        self.users.require_admin(auth, "switching metric export")
        if self.metrics is not None:
            self.metrics.enabled = bool(enabled)
        return self.metrics is not None and self.metrics.enabled

    def shutdown(self, auth: str | None = None) -> None:
        self.users.require_admin(auth, "shutting the scheduler down")
        self.clock.stop()
