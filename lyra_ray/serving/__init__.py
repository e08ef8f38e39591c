"""Serving side of live capacity loaning: demand estimation, load patterns and a load driver.

``demand`` and ``load_pattern`` are pure (no Ray, no clock, no I/O) so the scheduler core and
the simulator share them; ``load`` is the one module here that does I/O (HTTP to loopback).
"""
