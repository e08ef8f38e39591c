"""The scheduling cycle: the core's fold and decide, Gavel's rounds, the diff to actions.

Pure (no Ray, no clock, no I/O); both runtimes drive :class:`~.core.SchedulerCore`.
"""
