"""The scheduler's configuration: the ``lyra:`` section of cluster.yaml, checked at the
boundary (an InputError names the field) before any actor starts."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lyra_ray.autoscale.settings import AutoscaleSettings, parse_autoscale
from lyra_ray.contract.labels import GPU_TYPE_LABEL, POOL_LABEL
from lyra_ray.model.errors import InputError
from lyra_ray.model.throughput import (
    CatalogueThroughputs,
    parse_gavel_throughputs,
    read_throughputs_json,
)


@dataclass(frozen=True)
class SchedulerConfig:
    """The ``lyra:`` section of cluster.yaml (all fields optional)."""

    policy: str = "fifo"
    round_s: float = 360.0
    period_s: float = 1.0
    state_dir: str = "/tmp/lyra/state"
    storage_path: str = "/tmp/lyra/checkpoints"
    grace_s: float = 30.0
    run_restarts: int = 3
    """Restarts from its checkpoint of a run that crashed (a Train worker or the run's
    process died) before the job fails with the reason; the job's own code raising
    fails it at once."""
    min_lease_s: float = 30.0
    """A (re)started run keeps its GPUs until it has stepped this long (see SchedulerCore)."""
    startup_grace_s: float = 300.0
    min_reset_interval_s: float = 0.0
    """Gavel's simulator adopts a new allocation at most every 1,920 s; live, every change
    (arrival, completion) is adopted at the next round."""
    policy_args: Mapping[str, Any] = field(default_factory=dict)
    """Keyword arguments of the policy (e.g. ``reserve_fraction`` of ``lyra``)."""
    serve_host: str = "127.0.0.1"
    serve_port: int = 8000
    """Where Ray Serve's HTTP proxy listens for the inference services lyra owns."""
    backfill: bool = True
    """Hand GPUs that sit idle mid-round to waiting jobs at once (nobody is preempted),
    instead of leaving them idle until the round ends (Gavel's way, which the simulator
    keeps by default); see lyra_ray/scheduling/backfill.py."""
    metrics: bool = True
    """Export the scheduler's metrics through ``ray.util.metrics`` (docs/observability.md)."""
    entrypoint_check_s: float = 60.0
    """How long a submitted job's entrypoint may take to import (in a short-lived task
    with the job's runtime env, first setup included) before the job is refused."""

    teams: Any = None
    """Teams, quotas and memberships (``{teams: {NAME: {quota: "v100=4" |
    quota_effective: N, weight, borrow_limit, lend_limit, preemptible}}, users: {USER:
    TEAM}}``, docs/teams.md), checked here; written to the scheduler's store once per
    distinct config, so ``lyra team`` changes survive a restarted actor."""

    autoscale: Any = None
    """Asking Ray's autoscaler for nodes (``{enabled, budget_usd, budget_node_hours,
    max_usd_per_hour, commit_hours, prices}``, docs/autoscaling.md); ``lyra up --config``
    adds the cluster.yaml's node types under ``cluster``. Checked here."""
    executor: str = "warm"
    """How runs are carried out: ``warm`` (each job's gang of warm workers, which keep
    their processes through a resize, ``lyra_ray/runtime/gang.py``) or ``ray_train`` (a
    ``TorchTrainer.fit()`` per run, the path before #47)."""
    spare_ttl_s: float = 300.0
    """A warm worker a resize left without a GPU waits this long for the next grow
    before it ends (``warm`` executor)."""

    throughputs: Any = None
    """A throughput table laid over the catalogue (Gavel's JSON, as ``lyra profile``
    writes it): a file's path, read where the config is read, or the table itself. The
    scheduler saves it with its state, so a restart decides from the same table."""

    def throughput_table(self) -> CatalogueThroughputs | None:
        """The checked table of :attr:`throughputs`, or None."""
        if self.throughputs is None:
            return None
        return parse_gavel_throughputs(self.throughputs, "lyra config: field 'throughputs'")

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> SchedulerConfig:
        raw = dict(raw or {})
        known = set(cls.__dataclass_fields__)
        unknown = sorted(map(str, set(raw) - known))  # YAML keys may be ints: sort as text
        if unknown:
            raise InputError(f"lyra config: unknown field(s) {unknown}; known: {sorted(known)}")
        table = raw.get("throughputs")
        if isinstance(table, str):  # a path: the table travels, not the name of a file
            try:
                raw["throughputs"] = read_throughputs_json(table)
            except InputError as e:
                raise InputError(f"lyra config: field 'throughputs': {e}") from None
        elif table is not None and not isinstance(table, dict):
            raise InputError("lyra config: field 'throughputs': a file's path or a table")
        try:
            cfg = cls(**raw)
            positive = ("round_s", "period_s", "grace_s", "entrypoint_check_s", "spare_ttl_s")
            for f in (*positive, "min_lease_s", "startup_grace_s"):
                _finite(f, getattr(cfg, f), positive=f in positive)
            _finite("min_reset_interval_s", cfg.min_reset_interval_s, positive=False)
            if cfg.entrypoint_check_s > 3600:
                raise ValueError("field 'entrypoint_check_s' must be at most 3600 seconds")
            if cfg.executor not in ("warm", "ray_train"):
                raise ValueError(
                    f"field 'executor' must be 'warm' or 'ray_train', got {cfg.executor!r}"
                )
            for f in ("policy", "state_dir", "storage_path", "serve_host"):
                v = getattr(cfg, f)
                if not isinstance(v, str) or not v or "\x00" in v:
                    raise ValueError(f"field '{f}' must be a non-empty string, got {v!r}")
            if not isinstance(cfg.policy_args, Mapping) or not all(
                isinstance(k, str) for k in cfg.policy_args
            ):
                raise ValueError("field 'policy_args' must be a mapping of argument names")
            for flag in ("metrics", "backfill"):
                v = getattr(cfg, flag)
                if not isinstance(v, bool):
                    raise ValueError(f"field '{flag}' must be true or false, got {v!r}")
            r = cfg.run_restarts
            if isinstance(r, bool) or not isinstance(r, int) or not 0 <= r <= 1000:
                raise ValueError(f"field 'run_restarts' must be an integer in [0, 1000], got {r!r}")
            port = cfg.serve_port
            if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
                raise ValueError(f"field 'serve_port' must be a port number, got {port!r}")
        except (TypeError, ValueError) as e:
            raise InputError(f"lyra config: {e}") from None
        if ":" not in cfg.policy:  # a module:Class may import only on the cluster
            cfg = replace(cfg, policy_args=_checked_policy_args(cfg.policy, cfg.policy_args))
        if cfg.teams is not None:
            from lyra_ray.model.teams import parse_teams

            parse_teams(cfg.teams, "lyra config: field 'teams'")
        cfg.autoscale_settings()  # refused here, naming the field, not in the actor
        cfg.throughput_table()  # refused here, naming the entry, not in the actor
        return cfg

    def autoscale_settings(self) -> AutoscaleSettings:
        """The checked :attr:`autoscale` (off when absent)."""
        return parse_autoscale(self.autoscale, GPU_TYPE_LABEL, POOL_LABEL)


def _finite(name: str, value: Any, positive: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"field '{name}' must be a number, got {value!r}")
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float (found by fuzzing)
        finite = False
    if not finite or value < 0 or (positive and value == 0):
        raise ValueError(f"field '{name}' must be a finite number {'>' if positive else '>='} 0")


def _checked_policy_args(policy: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``policy_args`` refused here, naming the setting, not in the scheduler actor: each
    checked against the policy's settings, then the policy built once with them (its
    own range checks; ``lyra_ray/policies/args.py``)."""
    from lyra_ray.policies.args import check_policy_args
    from lyra_ray.policies.base import PolicyError, get_policy, policy_factory

    try:
        policy_factory(policy)
    except PolicyError as e:
        raise InputError(f"lyra config: field 'policy': {e}") from None
    try:
        checked = check_policy_args(policy, args)
        get_policy(policy, **checked)
    except (TypeError, ValueError) as e:  # PolicyError included
        raise InputError(f"lyra config: field 'policy_args': {e}") from None
    return checked
