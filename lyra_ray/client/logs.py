"""Best-effort access to a run's log through Ray's State API (needs the dashboard)."""

from __future__ import annotations

import logging

from lyra_ray.contract.names import gang_actor_name, run_actor_name

log = logging.getLogger(__name__)


def run_log(job_id: str, generation: int, tail: int = 100) -> str:
    """The tail of the log of what drives the run: its Ray Train actor, or the job's
    gang (the warm executor: one for all the job's runs)."""
    if generation <= 0:
        return "(never started)"
    try:
        from ray.util.state import get_log, list_actors

        name = run_actor_name(job_id, generation)
        actors = list_actors(filters=[("name", "=", name)], detail=False)
        if not actors:
            name = gang_actor_name(job_id)
            actors = list_actors(filters=[("name", "=", name)], detail=False)
        if not actors:
            return f"(no actor {name} in the State API)"
        lines = list(get_log(actor_id=actors[0].actor_id, tail=tail))
        return "".join(lines) or "(empty log)"
    except Exception as e:  # logs are a convenience: never fail the command over them
        log.debug("log lookup failed", exc_info=True)
        return f"(log unavailable: {e})"
