"""Example Ray Train entrypoints and the workload catalogue."""
