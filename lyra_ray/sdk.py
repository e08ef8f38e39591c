"""The Python SDK: submit, inspect, cancel and wait for jobs on a live lyra cluster.

It talks to the named scheduler actor (``lyra-scheduler`` in namespace ``lyra``) by
name and namespace, so it works from a laptop driver, from inside a ``ray job submit``
entrypoint (whose driver runs in an anonymous namespace) and with Ray token auth on
(``ray.init`` reads the token like any other driver). Specs are validated here first
(shape and fields), then by the scheduler (checks only the live cluster can make);
either way a bad spec raises :class:`SpecError` naming the field and nothing is queued.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from lyra_ray.runtime.home import recorded_auth_mode

if "RAY_AUTH_MODE" not in os.environ:
    # Ray reads the auth mode once, when it is imported, and a client given an explicit
    # address does not detect token auth itself: take the mode of the cluster `lyra up`
    # started here before Ray is imported (users elsewhere export RAY_AUTH_MODE).
    _mode = recorded_auth_mode()
    if _mode:
        os.environ["RAY_AUTH_MODE"] = _mode

import ray

from lyra_ray.model import JobSpec
from lyra_ray.model.errors import InputError
from lyra_ray.model.spec import load_job_entries, parse_job_spec
from lyra_ray.model.state import spec_to_dict
from lyra_ray.runtime.names import NAMESPACE, SCHEDULER_ACTOR
from lyra_ray.serving.spec import parse_service_spec

SpecError = InputError
TERMINAL = frozenset({"finished", "cancelled", "failed"})
T = TypeVar("T")


class LyraError(RuntimeError):
    """The scheduler is unreachable or refused a request that is not a spec error."""


class Client:
    def __init__(self, address: str | None = None, retry_s: float = 60.0) -> None:
        if not ray.is_initialized():
            from lyra_ray.runtime.quiet import init_ray

            init_ray(address or "auto")
        self.retry_s = retry_s
        self._actor = self._lookup()

    def _lookup(self) -> Any:
        try:
            return ray.get_actor(SCHEDULER_ACTOR, namespace=NAMESPACE)
        except ValueError:
            raise LyraError(
                f"no scheduler actor {SCHEDULER_ACTOR!r} in namespace {NAMESPACE!r}: "
                "is the cluster up (`lyra up`)?"
            ) from None

    def _call(self, method: str, *args: Any, retry: bool = True) -> Any:
        """Call the scheduler; while it restarts, retry idempotent calls."""
        deadline = time.monotonic() + (self.retry_s if retry else 0.0)
        while True:
            try:
                return ray.get(getattr(self._actor, method).remote(*args), timeout=60)
            except (
                ray.exceptions.RayActorError,
                ray.exceptions.ActorUnavailableError,
                ray.exceptions.GetTimeoutError,
            ):
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)
                with contextlib.suppress(LyraError):
                    self._actor = self._lookup()

    # ------------------------------------------------------------------ submit

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
        parse_job_spec(job, source=f"job {job.get('name')!r}" if job.get("name") else "job")
        return dict(job)

    def submit(self, job: JobSpec | Mapping[str, Any] | str | Path) -> str:
        """Queue one job; returns its id. A path must hold exactly one job."""
        if isinstance(job, str | Path):
            ids = self.submit_file(job)
            if len(ids) != 1:
                raise SpecError(f"{job}: holds {len(ids)} jobs; use submit_file()")
            return ids[0]
        token = uuid.uuid4().hex  # makes the retried call idempotent
        reply: dict[str, Any] = self._call("submit", self._to_dict(job), token)
        if not reply.get("ok"):
            raise SpecError(str(reply.get("error")))
        return str(reply["job_id"])

    def submit_file(self, path: str | Path) -> list[str]:
        """Queue every job of a YAML job list, after validating all of them."""
        return self.submit_entries(load_job_entries(path))

    def submit_entries(self, entries: Sequence[Mapping[str, Any]]) -> list[str]:
        """Queue every job mapping, after the scheduler has accepted all of them: one
        refused job queues none."""
        raws = [self._to_dict(e) for e in entries]
        for raw in raws:
            reply: dict[str, Any] = self._call("check", raw, retry=False)
            if not reply.get("ok"):
                raise SpecError(str(reply.get("error")))
        return [self.submit(raw) for raw in raws]

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

    def deploy_service(self, spec: Mapping[str, Any]) -> str:
        """Register and deploy an inference service on the inference pool; returns its
        HTTP URL. The spec is checked here first, then against the live pool."""
        parse_service_spec(spec)
        reply: dict[str, Any] = self._call("deploy_service", dict(spec), retry=False)
        if not reply.get("ok"):
            raise SpecError(str(reply.get("error")))
        return str(reply["url"])

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
