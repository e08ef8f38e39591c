"""lyra-ray: a cluster manager for shared, heterogeneous GPU clusters, built on Ray."""

__version__ = "0.1.0"
