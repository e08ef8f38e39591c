"""Shared settings and bookkeeping of the hostile-input campaign (issue #17, item 8).

Every fuzz target runs ``FUZZ_EXAMPLES`` hypothesis cases: a small, derandomised number
in ``make test`` (fast and reproducible), and ``LYRA_FUZZ_EXAMPLES=1000`` (or more) in
the full campaign (``python benchmarks/chaos.py``), which also sets ``LYRA_CHAOS_OUT``
so that each target records how many cases it ran and how they ended.

A case passes when the boundary either returns a valid result or raises
:class:`InputError` with a one-line message; anything else (a traceback) fails it.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings

from lyra_ray.model.errors import InputError

T = TypeVar("T")

FUZZ_EXAMPLES = int(os.environ.get("LYRA_FUZZ_EXAMPLES", "40"))
FULL = FUZZ_EXAMPLES >= 1000

fuzz = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    database=None,  # no .hypothesis/ directory in the repository
    derandomize=not FULL,  # make test: the same cases every run; the campaign: new ones
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


class Outcomes:
    """Counts how the cases of one target ended, and checks each error is clear."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.counts: Counter[str] = Counter()
        self.fields: Counter[str] = Counter()

    def run(self, fn: Callable[[], T], *, names_field: bool = False) -> T | None:
        """Call ``fn``; an InputError is a clear refusal, any other exception fails."""
        try:
            out = fn()
        except InputError as e:
            self.refused(str(e), names_field=names_field)
            return None
        self.counts["valid"] += 1
        return out

    def refused(self, msg: str, *, names_field: bool = False) -> None:
        assert msg and "\n" not in msg and "Traceback" not in msg, repr(msg)
        if names_field:  # "field 'x'" or "unknown field(s) [...]"
            assert "field" in msg, f"the error does not name a field: {msg!r}"
        if "field '" in msg:
            self.fields[msg.split("field '", 1)[1].split("'", 1)[0].split(".")[0]] += 1
        elif flag := re.search(r"(--[a-z][a-z-]*)", msg):  # the CLI names its flags
            self.fields[flag.group(1)] += 1
        self.counts["refused"] += 1

    def done(self) -> dict[str, Any]:
        """Record the target's figures (under ``$LYRA_CHAOS_OUT`` in the campaign)."""
        total = sum(self.counts.values())
        assert total > 0, f"{self.target}: no case ran"
        out = {
            "target": self.target,
            "cases": total,
            "valid": self.counts["valid"],
            "refused": self.counts["refused"],
            "other": {k: v for k, v in self.counts.items() if k not in ("valid", "refused")},
            "tracebacks": 0,  # any traceback fails the test before this line
            "fields_named": dict(self.fields.most_common()),
            "max_examples": FUZZ_EXAMPLES,
        }
        where = os.environ.get("LYRA_CHAOS_OUT")
        if where:
            Path(where).mkdir(parents=True, exist_ok=True)
            (Path(where) / f"fuzz-{self.target}.json").write_text(json.dumps(out, indent=2))
        return out


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Fail a case that hangs (SIGALRM; main thread only) instead of hanging the run."""

    def _raise(_signum: int, _frame: Any) -> None:
        raise TimeoutError(f"case still running after {seconds}s")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
