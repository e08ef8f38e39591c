"""The node labels lyra reads and pins work by.

WHY shared: ``lyra up`` and the embedded cluster put them on nodes, the executor reads
them to build its inventory and pins Train workers and Serve replicas with them, and a
job's step loop reads its own node's GPU type from them. One spelling, one place.
"""

GPU_TYPE_LABEL = "gpu-type"
"""A GPU node's accelerator type (``V100``, ``H200``, ...), as the operator wrote it."""
POOL_LABEL = "pool"
"""``training`` (the default), ``inference`` (a serving node that may be lent) or ``head``."""
NODE_ID_LABEL = "ray.io/node-id"
"""Ray's own label: pins a worker or a replica to the node the placer chose."""
