"""The Python SDK: submit, inspect, cancel and wait for jobs on a live lyra cluster.

It talks to the named scheduler actor (``lyra-scheduler`` in namespace ``lyra``) by
name and namespace, so it works from a laptop driver, from inside a ``ray job submit``
entrypoint (whose driver runs in an anonymous namespace) and with Ray token auth on
(``ray.init`` reads the token like any other driver). Specs are validated here first
(shape and fields), then by the scheduler (checks only the live cluster can make);
either way a bad spec raises :class:`SpecError` naming the field and nothing is queued.

Identity: every call carries the caller's lyra token (``LYRA_TOKEN``, else the file
``LYRA_TOKEN_FILE`` names, else ``$LYRA_HOME/token``, which ``lyra up --local`` writes
for its first admin); a cluster with identities on refuses a missing or wrong one with
:class:`AuthError` and changes nothing. A cluster with no users ignores tokens.

Code: a job runs in the runtime env of the driver that submits it (inside ``ray job
submit --working-dir D``: ``D``), overridden by ``submit(..., runtime_env=...)`` and by the
job's own ``runtime_env`` field; local paths are uploaded (:mod:`lyra_ray.client.user_env`).
"""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from lyra_ray.client.home import recorded_auth_mode, resolve_token
from lyra_ray.contract.errors import AuthError, LyraError

if "RAY_AUTH_MODE" not in os.environ:
    # Ray reads the auth mode once, when it is imported, and a client given an explicit
    # address does not detect token auth itself: take the mode of the cluster `lyra up`
    # started here before Ray is imported (users elsewhere export RAY_AUTH_MODE).
    _mode = recorded_auth_mode()
    if _mode:
        os.environ["RAY_AUTH_MODE"] = _mode

import ray

from lyra_ray.contract.names import NAMESPACE, SCHEDULER_ACTOR
from lyra_ray.model import JobSpec
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import load_job_entries
from lyra_ray.model.state import spec_to_dict

if TYPE_CHECKING:
    from lyra_ray.client.service_handle import ServiceHandle

SpecError = InputError
log = logging.getLogger(__name__)
TERMINAL = frozenset({"finished", "cancelled", "failed"})
T = TypeVar("T")
BOUNDARY_TIMEOUT_S = 900.0
"""``check`` / ``submit`` wait for the scheduler's entrypoint check (bounded there: its
worker's start, at most 300 s, then ``entrypoint_check_s`` for the import)."""

__all__ = ["TERMINAL", "AuthError", "Client", "LyraError", "SpecError"]


class Client:
    def __init__(
        self, address: str | None = None, retry_s: float = 60.0, token: str | None = None
    ) -> None:
        """``token``: the caller's lyra token; None reads ``LYRA_TOKEN`` and the files
        the module docstring names."""
        if not ray.is_initialized():
            from lyra_ray.client.quiet import init_ray

            init_ray(address or "auto")
        self.retry_s = retry_s
        self.token = token if token is not None else resolve_token()
        self._actor = self._lookup()
        self.ray_job = None
        """The Ray job this driver runs as (``ray job submit``): recorded with each job."""
        from lyra_ray.client.user_env import ray_job_id

        self.ray_job = ray_job_id()
        self.deploy_notes: list[str] = []
        """What the last deploy said each service's copies run (one line each)."""
        self.dropped_env: list[str] = []
        """Keys of the driver's runtime env the last submission did not carry (told to
        the user by the CLI): fields lyra does not support, and any lyra token."""

    def _lookup(self) -> Any:
        try:
            return ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE)
        except ValueError:
            raise LyraError(
                f"no scheduler actor {SCHEDULER_ACTOR!r} in namespace {NAMESPACE!r}: "
                "is the cluster up (`lyra up`)?"
            ) from None

    def _call(
        self, method: str, *args: Any, retry: bool = True, timeout: float = 60.0, **kw: Any
    ) -> Any:
        """Call the scheduler with this client's token; while it restarts, retry
        idempotent calls. A refused token raises :class:`AuthError`."""
        deadline = time.monotonic() + (self.retry_s if retry else 0.0)
        while True:
            try:
                ref = getattr(self._actor, method).remote(*args, auth=self.token, **kw)
                return ray.get(ref, timeout=timeout)
            except ray.exceptions.RayTaskError as e:
                if isinstance(e.cause, PermissionError):
                    raise AuthError(str(e.cause)) from None
                raise
            except (
                ray.exceptions.RayActorError,
                ray.exceptions.ActorUnavailableError,
                ray.exceptions.GetTimeoutError,
            ) as e:
                if time.monotonic() > deadline:
                    if isinstance(e, ray.exceptions.GetTimeoutError):
                        raise LyraError(
                            f"the scheduler did not answer {method!r} within {timeout:g} s "
                            "(busy or stuck: its GlobalScheduler actor's log says which)"
                        ) from None
                    raise
                time.sleep(1.0)
                with contextlib.suppress(LyraError):
                    self._actor = self._lookup()

    # ------------------------------------------------------------------ submit

    def _prepare(
        self,
        raw: dict[str, Any],
        base: str | Path,
        runtime_env: Mapping[str, Any] | None,
        inherit: bool,
    ) -> dict[str, Any]:
        """The job with the runtime env it runs in, local paths uploaded."""
        from lyra_ray.client.user_env import client_env

        env, self.dropped_env = client_env(raw, base, runtime_env, inherit)
        out = {k: v for k, v in raw.items() if k != "runtime_env"}
        if env:
            out["runtime_env"] = env
        return out

    @staticmethod
    def _to_dict(job: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
        if isinstance(job, JobSpec):
            d = spec_to_dict(job)
            if d.pop("throughput_by_size", None) is not None:
                raise SpecError(
                    f"job {job.name!r}: a JobSpec planned from a model cannot be sent as "
                    "is; submit the job's mapping (with its 'model') instead"
                )
            return d
        if not isinstance(job, Mapping):
            raise SpecError(f"job: expected a JobSpec, a dict or a path, got {type(job).__name__}")
        return dict(job)  # checked once, by the scheduler's boundary

    def submit(
        self,
        job: JobSpec | Mapping[str, Any] | str | Path,
        runtime_env: Mapping[str, Any] | None = None,
        inherit_env: bool = True,
        team: str | None = None,
    ) -> str:
        """Queue one job; returns its id. A path must hold exactly one job. ``team``:
        the team it runs under (one you belong to; default: your team).

        ``runtime_env`` (``working_dir``, ``py_modules``, ``pip``, ``env_vars``, as Ray
        defines them; local paths relative to the current directory) overrides this
        driver's own; the job's ``runtime_env`` field overrides both. ``inherit_env``:
        start from this driver's runtime env (Ray's own rule for tasks it starts)."""
        if isinstance(job, str | Path):
            ids = self.submit_file(job, runtime_env, inherit_env, team=team)
            if len(ids) != 1:
                raise SpecError(f"{job}: holds {len(ids)} jobs; use submit_file()")
            return ids[0]
        raw = self._prepare(self._to_dict(job), ".", runtime_env, inherit_env)
        return self._submit_prepared(raw, team)

    def _submit_prepared(self, raw: dict[str, Any], team: str | None = None) -> str:
        token = uuid.uuid4().hex  # makes the retried call idempotent
        origin = {"ray_job": self.ray_job} if self.ray_job else None
        extra: dict[str, Any] = {"team": team} if team is not None else {}
        reply: dict[str, Any] = self._call(
            "submit", raw, token, origin=origin, timeout=BOUNDARY_TIMEOUT_S, **extra
        )
        if not reply.get("ok"):
            raise SpecError(str(reply.get("error")))
        return str(reply["job_id"])

    def submit_file(
        self,
        path: str | Path,
        runtime_env: Mapping[str, Any] | None = None,
        inherit_env: bool = True,
        team: str | None = None,
    ) -> list[str]:
        """Queue every job of a YAML job list, after validating all of them; a job's own
        ``runtime_env`` paths are relative to the file's folder."""
        return self.submit_entries(
            load_job_entries(path), runtime_env, inherit_env, base=Path(path).parent, team=team
        )

    def submit_entries(
        self,
        entries: Sequence[Mapping[str, Any]],
        runtime_env: Mapping[str, Any] | None = None,
        inherit_env: bool = True,
        base: str | Path = ".",
        team: str | None = None,
    ) -> list[str]:
        """Queue every job mapping, after the scheduler has accepted all of them: one
        refused job queues none (``team``: as :meth:`submit`)."""
        raws = [self._prepare(self._to_dict(e), base, runtime_env, inherit_env) for e in entries]
        tokens = [uuid.uuid4().hex for _ in raws]  # a retried call queues each job once
        origin = {"ray_job": self.ray_job} if self.ray_job else None
        extra: dict[str, Any] = {"team": team} if team is not None else {}
        reply: dict[str, Any] = self._call(
            "submit_all",
            raws,
            tokens,
            origin=origin,
            timeout=BOUNDARY_TIMEOUT_S * len(raws),
            **extra,
        )
        if not reply.get("ok"):
            raise SpecError(str(reply.get("error")))
        return [str(j) for j in reply["job_ids"]]

    # ------------------------------------------------------------------ inspect

    def status(self, job_id: str) -> dict[str, Any]:
        st: dict[str, Any] | None = self._call("status", job_id)
        if st is None:
            raise LyraError(f"unknown job {job_id!r}")
        return st

    def list(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = self._call("list")
        return out

    def cancel(self, job_id: str) -> None:
        reply: dict[str, Any] = self._call("cancel", job_id)
        if not reply.get("ok"):
            raise LyraError(str(reply.get("error")))

    def wait(
        self,
        job_id: str,
        timeout: float | None = None,
        poll_s: float = 1.0,
        on_update: Callable[[dict[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        """Block until the job is finished, cancelled or failed; returns its status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            st = self.status(job_id)
            if on_update is not None:
                on_update(st)
            if st["status"] in TERMINAL:
                return st
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {st['status']} after {timeout}s")
            time.sleep(poll_s)

    # ------------------------------------------------------------------ serving

    def deploy_service(
        self,
        spec: Mapping[str, Any] | str | Path,
        runtime_env: Mapping[str, Any] | None = None,
    ) -> str:
        """Deploy one inference service on the inference pool; returns its HTTP URL.

        ``spec``: the service's fields (your Serve app: ``name``, ``import_path``,
        ``args``, ``runtime_env``, ``deployments``, and lyra's sizing fields, see
        docs/cli.md), a Serve config holding one application, or a path to either
        (local paths in it relative to its folder). ``runtime_env`` (relative to the
        current directory) goes under the service's own. Its code is uploaded as a
        job's is; the scheduler then imports and builds the app in a Ray task before
        deploying anything. A refusal raises :class:`SpecError` naming the field."""
        urls = self.deploy_services(spec, runtime_env)
        if len(urls) != 1:
            raise SpecError(f"service: {len(urls)} applications given; use deploy_services()")
        return next(iter(urls.values()))

    def deploy_services(
        self,
        config: Mapping[str, Any] | Sequence[Mapping[str, Any]] | str | Path,
        runtime_env: Mapping[str, Any] | None = None,
    ) -> dict[str, str]:
        """Deploy every application of a Serve config (or one service's fields, or a
        list of services), all checked before any is deployed; returns each service's
        URL by name."""
        from lyra_ray.client.service_files import (
            localized,
            prepared,
            read_service_file,
            services_of,
        )

        base: str | Path = "."
        if isinstance(config, str | Path):
            base, config = Path(config).parent, read_service_file(config)
        given: list[Any] = list(config) if isinstance(config, list | tuple) else [config]
        services = [s for c in given for s in services_of(c)]
        raws = prepared(localized(services, base), base, runtime_env)
        reply: dict[str, Any] = self._call(
            "deploy_services", raws, retry=False, timeout=BOUNDARY_TIMEOUT_S
        )
        if not reply.get("ok"):
            raise SpecError(str(reply.get("error")))
        self.deploy_notes = [str(s["note"]) for s in reply["services"] if s.get("note")]
        for note in self.deploy_notes:
            (log.warning if "autoscaling_config" in note else log.info)("%s", note)
        return {str(s["service"]): str(s["url"]) for s in reply["services"]}

    def service_handle(self, name: str) -> ServiceHandle:
        """A handle on service ``name``'s application for Python callers:
        ``handle.remote(...)`` / ``handle.method.remote(...)`` reach the ingress
        deployment of a serving server's copy, across lends and reclaims (through
        lyra's ingress, which counts the call as demand and drains it like a request)."""
        from lyra_ray.client.service_handle import ServiceHandle

        for s in self.overview()["serving"]["services"]:
            if s["name"] == name:
                if s.get("model") != "app":
                    raise SpecError(
                        f"field 'service': {name!r} is lyra's {s.get('model')} "
                        "service; handles reach users' applications"
                    )
                return ServiceHandle(name)
        raise SpecError(f"field 'service': unknown service {name!r}")

    def remove_service(self, name: str) -> None:
        reply: dict[str, Any] = self._call("remove_service", name)
        if not reply.get("ok"):
            raise LyraError(str(reply.get("error")))

    def overview(self) -> dict[str, Any]:
        """Servers (with serving / draining / lent / reclaiming), jobs and services."""
        out: dict[str, Any] = self._call("overview")
        return out

    def service_url(self, name: str) -> str:
        for s in self.overview()["serving"]["services"]:
            if s["name"] == name:
                return str(s["url"])
        raise SpecError(f"field 'service': unknown service {name!r}")

    def call(self, method: str, *args: Any) -> Any:
        """Raw access to the scheduler's introspection methods (runs, launches, stats)."""
        return self._call(method, *args)

    # ------------------------------------------------------------------ identities

    def whoami(self) -> dict[str, Any]:
        """``{"name", "admin", "identities"}`` for this client's token."""
        out: dict[str, Any] = self._call("whoami")
        return out

    def add_user(self, name: str, admin: bool = False, team: str | None = None) -> str:
        """Create a user (admins only; the first user of an open cluster must be an
        admin), in ``team`` (default: ``default``); returns its token, which lyra keeps
        only as a hash."""
        extra: dict[str, Any] = {"team": team} if team is not None else {}
        return self._user_reply(self._call("user_add", name, admin, retry=False, **extra))

    def move_user(self, name: str, team: str) -> None:
        """Put a user in another team (admins only); their running jobs keep theirs."""
        self._user_reply(self._call("user_move", name, team))

    # ------------------------------------------------------------------ teams (admins)

    def add_team(self, name: str, **settings: Any) -> dict[str, Any]:
        """Create a team: ``quota="v100=4,k80=2"`` or ``quota_effective=8.0``, and
        ``weight``, ``borrow_limit``, ``lend_limit``, ``preemptible`` (docs/teams.md)."""
        return self._team_reply(self._call("team_add", name, settings, retry=False))

    def set_team(self, name: str, **settings: Any) -> dict[str, Any]:
        """Change some of a team's settings (``None`` clears a limit)."""
        return self._team_reply(self._call("team_set", name, settings))

    def remove_team(self, name: str, force: bool = False) -> dict[str, Any]:
        """Delete a team; refused while it has running or queued jobs unless ``force``
        (which cancels them). Its members go back to ``default``."""
        return self._team_reply(self._call("team_remove", name, force))

    def teams(self) -> builtins.list[dict[str, Any]]:
        """Every team's settings and members."""
        out: builtins.list[dict[str, Any]] = self._call("team_list")
        return out

    def team_reference(self, reference: str | None = None) -> dict[str, Any]:
        """The reference type of effective quotas: shown, or set to a GPU type the
        cluster has (``"auto"``: its most common training type; admins only)."""
        return self._team_reply(self._call("team_reference", reference))

    @staticmethod
    def _team_reply(reply: dict[str, Any]) -> dict[str, Any]:
        if not reply.get("ok"):
            raise SpecError(str(reply.get("error")))
        return reply

    def issue_token(self, name: str) -> str:
        """Another token for an existing user (admins only)."""
        return self._user_reply(self._call("user_token", name, retry=False))

    def remove_user(self, name: str) -> None:
        self._user_reply(self._call("user_remove", name))

    def users(self) -> builtins.list[dict[str, Any]]:
        out: builtins.list[dict[str, Any]] = self._call("user_list")
        return out

    @staticmethod
    def _user_reply(reply: dict[str, Any]) -> str:
        if not reply.get("ok"):
            raise SpecError(str(reply.get("error")))
        return str(reply.get("token", ""))
