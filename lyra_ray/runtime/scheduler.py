"""The GlobalScheduler: a detached, named, restartable actor that runs the one loop.

It is deliberately thin: it wires its services and exposes their methods to Ray. Every
decision is the core's; the loop (:func:`lyra_ray.scheduling.loop.loop`) and its live
parts (:mod:`lyra_ray.runtime.cycle`: wall clock, SQLite inbox and store) decide when to
poll and what to fold; every Ray call is the executor's
(:class:`~lyra_ray.runtime.ray_runtime.RayRuntime`) or the serving pool's. The SDK's
calls go to the job desk (:mod:`lyra_ray.runtime.desk`: submit, cancel, status, list)
and the views (:mod:`lyra_ray.runtime.scheduler_views`), members of this actor rather
than mixins, so each owns its own fields.

Every method that reads or changes jobs, services or users takes the caller's lyra
token (``auth``) and checks it (:mod:`lyra_ray.runtime.auth`): any Ray client may call
any method of this actor, so the check cannot live in the SDK. A scheduler with no user
runs open.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

import ray

from lyra_ray import model as m
from lyra_ray.model.throughput import (
    CatalogueThroughputs,
    MeasuredThroughputs,
    catalogue_throughputs,
    parse_gavel_throughputs,
)
from lyra_ray.policies.base import Policy, get_policy
from lyra_ray.runtime.actor_log import actor_logging
from lyra_ray.runtime.archive import JobArchive
from lyra_ray.runtime.auth import Users
from lyra_ray.runtime.autoscale import AutoscaleDriver, policy_args
from lyra_ray.runtime.boundary import Boundary, JobMeta
from lyra_ray.runtime.config import SchedulerConfig
from lyra_ray.runtime.cycle import CycleStats, Inbox, LiveCycle, LiveStore, WallClock, restored_runs
from lyra_ray.runtime.desk import JobDesk
from lyra_ray.runtime.metrics import SchedulerMetrics, TimedPolicy
from lyra_ray.runtime.ray_runtime import RayRuntime
from lyra_ray.runtime.saved_state import inspect_saved
from lyra_ray.runtime.scheduler_views import SchedulerViews
from lyra_ray.runtime.serving import ServingPool
from lyra_ray.runtime.store import StateStore
from lyra_ray.runtime.teams.desk import TeamDesk
from lyra_ray.runtime.teams.metrics import TeamMetrics
from lyra_ray.runtime.teams.policy import live_team_policy
from lyra_ray.runtime.teams.registry import TeamRegistry
from lyra_ray.runtime.teams.store import TeamStore
from lyra_ray.scheduling.core import SchedulerCore, default_rounds

log = logging.getLogger(__name__)


@ray.remote(num_cpus=0, max_restarts=-1, max_concurrency=16)  # type: ignore[call-overload]
class GlobalScheduler:
    def __init__(self, cfg: SchedulerConfig) -> None:
        """``cfg`` was checked where it was read (:func:`start_scheduler`), once."""
        actor_logging()
        self.cfg = cfg
        # before the store opens it: a state this lyra cannot resume from is refused in
        # one line and left untouched (SavedStateError ends this actor's creation)
        self.saved = inspect_saved(self.cfg.state_dir)
        self.store = StateStore(self.cfg.state_dir)
        self.users = Users(self.store)
        self.lock = threading.RLock()
        self.wake = threading.Event()
        self.throughputs = MeasuredThroughputs(self._seed())
        jobmeta = JobMeta(self.store)
        self.teams = TeamRegistry(
            TeamStore(self.store.path),
            self.users,
            self._gpus,
            self.throughputs,
            jobmeta.team,
            self._active_specs,
        )
        self.teams.apply_config(self.cfg.teams)
        autoscale = self.cfg.autoscale_settings()
        policy = get_policy(
            self.cfg.policy, **policy_args(self.cfg.policy, self.cfg.policy_args, autoscale)
        )
        live_policy = live_team_policy(policy, self.teams.for_snapshot)
        self.metrics = SchedulerMetrics() if self.cfg.metrics else None
        self.core = SchedulerCore(
            cast(Policy, TimedPolicy(live_policy, self.metrics.observe_solve))
            if self.metrics is not None
            else live_policy,
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
            node_ready=self.serving.node_ready,
            max_restarts=self.cfg.run_restarts,
            run_options=jobmeta.meta,
            speeds=lambda spec, g: self.throughputs.throughput(spec, g, 1),
            executor=self.cfg.executor,
            gang_settings={"spare_ttl_s": self.cfg.spare_ttl_s},
        )
        archive = JobArchive(self.store)
        inbox = Inbox(self.store, self.core)
        self.live = LiveStore(self.store, inbox, self.runtime, self.serving, archive)
        self.autoscale = AutoscaleDriver(
            autoscale, self.cfg.state_dir, self._serving_nodes, self.metrics
        )
        boundary = Boundary(self._admissible_gpus, self.throughputs, self.cfg.entrypoint_check_s)
        self.desk = JobDesk(
            self.core,
            self.store,
            self.users,
            boundary,
            jobmeta,
            archive,
            self.runtime,
            lambda: self.live.reasons,
            self.lock,
            self.wake,
            self.teams,
        )
        self.team_desk = TeamDesk(self.teams, self.users, self.desk, self.wake)
        stats = CycleStats(self.metrics, self.serving.metrics_view, self.runtime.phases.take_fresh)
        observers = (stats, self.desk, TeamMetrics(self.teams, self.metrics), self.autoscale)
        self.cycle = LiveCycle(self.core, self.live, self.runtime, self.serving, observers)
        self.clock = WallClock(self.cfg.period_s, self.wake)
        self.views = SchedulerViews(
            self.cfg,
            self.core,
            self.runtime,
            self.serving,
            self.desk,
            self.live,
            stats,
            self.clock,
            self.users,
            self.metrics,
            self.lock,
            self.wake,
        )
        self._restore()
        self.live.save(self.core, [])
        log.info("scheduling: policy %s, state %s", self.cfg.policy, self.cfg.state_dir)
        threading.Thread(target=self._loop, name="lyra-loop", daemon=True).start()

    def _restore(self) -> None:
        """A restarted actor resumes from its last commit: the core, the executor's runs,
        the serving pool; then the executor carries out what was decided but not done.

        The same holds for a new cluster over an old state directory (``lyra down``,
        then ``lyra up`` with the same ``--dir``): every job is kept. Nodes the state
        knows but Ray does not are the old cluster's: the executor's first refresh
        reports them down, so their jobs resume elsewhere from their newest checkpoints,
        as on node loss. A state saved under another policy keeps its jobs and drops
        only that policy's own state (:meth:`Decider.load_state`), with one warning."""
        saved = self.store.load()
        if saved is None:
            return
        self.core.load_state(saved["core"])
        dropped = self.core.decider.dropped_policy_state
        if dropped is not None:
            log.warning(
                "the saved state was %s's, this scheduler runs %s: dropped that policy's own "
                "state, rounds and allocation; kept all %d jobs",
                dropped,
                self.core.decider.policy_name,
                len(self.core.jobs),
            )
        live = set(self.runtime.inventory.read())
        gone = sorted(n for n in self.core.nodes if n not in live)
        if gone:
            log.info("%d node(s) of the saved state are not in this cluster: forgotten", len(gone))
        self.live.restored = {
            **(self.saved.to_json() if self.saved is not None else {}),
            "policy_dropped": dropped,
            "nodes_forgotten": len(gone),
        }
        self.runtime.load_state(saved["runtime"])
        self.serving.load_state(saved.get("serving", {}))
        self.live.restored["services_dropped"] = dict(self.serving.dropped)
        self.serving.node_events([m.NodeUp(n) for n in self.core.nodes.values()])
        self.runtime.seed_nodes(self.core.nodes.values())
        self.live.reasons = dict(saved.get("reasons", {}))
        self.live.restarts = int(saved.get("restarts", 0)) + 1
        self.runtime.reconcile(restored_runs(self.core))
        if self.metrics is not None:
            self.metrics.skip_reclaims(len(self.serving.loans.reclaims))
        log.info("restored %d jobs (restart %d)", len(self.core.jobs), self.live.restarts)

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

    def _loop(self) -> None:
        self.cycle.run(
            self.clock, self.lock, lambda e: log.exception("scheduling cycle failed", exc_info=e)
        )

    def _active_specs(self) -> list[Any]:
        """The queued and running jobs' specs (effective quotas' capacity rule)."""
        with self.lock:
            return [j.spec for j in self.core.state.active_jobs()]

    def _gpus(self, live: bool = False) -> dict[str, int]:
        """GPUs per type for the desk and the teams: the loop's view, or Ray's own
        (``live``, or before the loop's first poll). Never a refresh of the view: its
        NodeUp events are the loop's next cycle's, and one taken here was lost for good
        (a submit that beat the first poll left the core without the node, every job
        queued forever: #47, ``resize_phases.py`` "timed out waiting for grown to 4")."""
        with self.lock:
            return self.runtime.inventory.gpus_now(live)

    def _admissible_gpus(self, live: bool = False) -> dict[str, int]:
        """What a job may ask for: the GPUs up, or what the autoscaler may add (a job for
        a type no node of which is up yet is queued, and lyra asks for the nodes)."""
        gpus = self._gpus(live)
        for g, n in self.autoscale.settings.possible_gpus().items():
            gpus[g] = max(gpus.get(g, 0), n)
        return gpus

    def _serving_nodes(self) -> frozenset[str]:
        """Inference servers that hold a service's replicas (or are being drained or
        redeployed): the autoscaler is never asked to let them go."""
        return frozenset(self.serving.state) if self.serving.services else frozenset()

    # ------------------------------------------------------------------ the job desk

    def check(self, raw: dict[str, Any], auth: str | None = None) -> dict[str, Any]:
        return self.desk.check(raw, auth)

    def submit(
        self,
        raw: dict[str, Any],
        token: str | None = None,
        auth: str | None = None,
        origin: dict[str, Any] | None = None,
        team: str | None = None,
    ) -> dict[str, Any]:
        return self.desk.submit(raw, token, auth, origin, team)

    def submit_all(
        self,
        raws: list[dict[str, Any]],
        tokens: list[str | None] | None = None,
        auth: str | None = None,
        origin: dict[str, Any] | None = None,
        team: str | None = None,
    ) -> dict[str, Any]:
        return self.desk.submit_all(raws, tokens, auth, origin, team)

    def cancel(self, job_id: str, auth: str | None = None) -> dict[str, Any]:
        return self.desk.cancel(job_id, auth)

    def status(self, job_id: str, auth: str | None = None) -> dict[str, Any] | None:
        row = self.desk.status(job_id, auth)
        return None if row is None else self.autoscale.annotate([row])[0]

    # ------------------------------------------------------------------ views and admin

    def ping(self, auth: str | None = None) -> dict[str, Any]:
        return self.views.ping(auth)

    def whoami(self, auth: str | None = None) -> dict[str, Any]:
        return self.views.whoami(auth)

    def overview(self, auth: str | None = None) -> dict[str, Any]:
        out = self.views.overview(auth)
        with self.lock:
            out["teams"] = [s.to_json() for s in self.teams.standings(self.core.snapshot())]
        out["team_settings"] = self.teams.settings()
        out["jobs"] = self.autoscale.annotate(out["jobs"])
        out["autoscale"] = self.autoscale.view()
        return out

    def nodes(self, auth: str | None = None) -> list[dict[str, Any]]:
        return self.views.nodes(auth)

    def launches(self, auth: str | None = None) -> list[tuple[float, str, int, dict[str, Any]]]:
        return self.views.launches(auth)

    def runs(self, auth: str | None = None) -> dict[str, dict[str, Any]]:
        return self.views.runs(auth)

    def history(self, auth: str | None = None) -> list[dict[str, Any]]:
        return self.views.history(auth)

    def stats(self, auth: str | None = None) -> dict[str, Any]:
        return self.views.stats(auth)

    def deploy_service(self, raw: dict[str, Any], auth: str | None = None) -> dict[str, Any]:
        return self.views.deploy_service(raw, auth)

    def deploy_services(
        self, raws: list[dict[str, Any]], auth: str | None = None
    ) -> dict[str, Any]:
        return self.views.deploy_services(raws, auth)

    def remove_service(self, name: str, auth: str | None = None) -> dict[str, Any]:
        return self.views.remove_service(name, auth)

    def user_add(
        self, name: str, admin: bool = False, auth: str | None = None, team: str | None = None
    ) -> dict[str, Any]:
        return self.team_desk.user_add(name, admin, team, auth)

    def user_move(self, name: str, team: str, auth: str | None = None) -> dict[str, Any]:
        return self.team_desk.move(name, team, auth)

    def team_add(self, name: str, settings: dict[str, Any], auth: str | None = None) -> Any:
        return self.team_desk.add(name, settings, auth)

    def team_set(self, name: str, settings: dict[str, Any], auth: str | None = None) -> Any:
        return self.team_desk.change(name, settings, auth)

    def team_remove(self, name: str, force: bool = False, auth: str | None = None) -> Any:
        return self.team_desk.remove(name, force, auth)

    def team_list(self, auth: str | None = None) -> list[dict[str, Any]]:
        return self.team_desk.list(auth)

    def team_reference(self, reference: str | None = None, auth: str | None = None) -> Any:
        return self.team_desk.reference(reference, auth)

    def user_token(self, name: str, auth: str | None = None) -> dict[str, Any]:
        return self.views.user_token(name, auth)

    def user_remove(self, name: str, auth: str | None = None) -> dict[str, Any]:
        out = self.views.user_remove(name, auth)
        if out.get("ok"):
            self.teams.forget(name)
        return out

    def user_list(self, auth: str | None = None) -> list[dict[str, Any]]:
        return self.views.user_list(auth)

    def inject_fault(self, point: str, auth: str | None = None) -> dict[str, Any]:
        return self.views.inject_fault(point, auth)

    def set_metrics_export(self, enabled: bool, auth: str | None = None) -> bool:
        return self.views.set_metrics_export(enabled, auth)

    def shutdown(self, auth: str | None = None) -> None:
        self.views.shutdown(auth)

    def list(self, auth: str | None = None) -> list[dict[str, Any]]:
        return self.desk.list(auth)
