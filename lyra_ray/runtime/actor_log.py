"""How lyra's actors log: Python's ``logging`` to the worker's stderr, each line stamped.

WHY: Ray keeps an actor's stderr as its ``worker-*.err`` file, which the dashboard
shows and a failed live test's report quotes (``tests/actor_logs.py``). Without a time
on each line, a log tail said what the scheduler did but not when, so a wait that ran
out (a lend that came too late, a node declared down after the test gave up) could not
be put beside the test's own clock. Ray's own lines there carry their time already.
"""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def actor_logging() -> None:
    """INFO and up, stamped; does nothing where the process configured logging already."""
    logging.basicConfig(level=logging.INFO, format=FORMAT)
