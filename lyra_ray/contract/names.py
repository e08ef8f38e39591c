"""The names that the scheduler, the SDK and a job's step loop find each other by.

Constants (and the one function that spells a run's actor name), so that each side can
import them without importing the others (the SDK must not pull in the scheduler actor,
nor the scheduler the SDK).
"""

NAMESPACE = "lyra"
"""The Ray namespace of lyra's named actors (``ray job submit`` drivers run in an
anonymous one, so every lookup names it)."""
SCHEDULER_ACTOR = "lyra-scheduler"
CONTROL_ACTOR = "lyra-control"
RUN_PREFIX = "lyra-run-"
"""The Ray Train driver actor of each run (the ``ray_train`` executor): ``lyra logs``
finds a run's log by it."""
RESUME_KEY = "lyra_resume_from"
"""train_loop_config key holding the checkpoint path to resume from: the runtime sets it,
a job's step loop reads it."""
GANG_PREFIX = "lyra-gang-"
"""Each job's gang of warm workers (the ``warm`` executor), one actor for all its runs."""


def run_actor_name(job_id: str, generation: int) -> str:
    """One actor name per run generation: a new run never races a dying one for a name."""
    return f"{RUN_PREFIX}{job_id}-g{generation}"


def gang_actor_name(job_id: str) -> str:
    """One gang per job, for all its generations."""
    return f"{GANG_PREFIX}{job_id}"
