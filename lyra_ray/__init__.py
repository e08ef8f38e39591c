"""lyra-ray: a cluster manager for shared, heterogeneous GPU clusters, built on Ray."""

__version__ = "0.1.0"

# The composition root: the model layer imports nothing above it, so the parallelism
# planner plugs into job-spec parsing by registering itself when imported
# (lyra_ray/model/plugins.py). Importing it here, once, means every process that parses a
# job's `model:` field (CLI, SDK, scheduler, simulator) has it, whichever module it
# imported first.
from lyra_ray import parallelism as _parallelism  # noqa: F401
