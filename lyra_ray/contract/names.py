"""The names that the scheduler, the SDK and a job's step loop find each other by.

A module of constants only, so that each side can import them without importing the
others (the SDK must not pull in the scheduler actor, nor the scheduler the SDK).
"""

NAMESPACE = "lyra"
"""The Ray namespace of lyra's named actors (``ray job submit`` drivers run in an
anonymous one, so every lookup names it)."""
SCHEDULER_ACTOR = "lyra-scheduler"
CONTROL_ACTOR = "lyra-control"
