"""Errors raised at the boundary for bad user input.

Each message names the file, line and field so that a user can fix the input without
reading a traceback; the CLI turns :class:`InputError` into exit code 2.
"""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad user input: a job spec, a trace line, a cluster spec or a config field."""


def read_text_input(path: str | Path, what: str) -> str:
    """A user's text file, or an InputError (unreadable, or not UTF-8 text).

    Here rather than beside the job-file parser (:mod:`lyra_ray.model.spec`, which
    re-exports it) so that reading a Gavel trace does not import pydantic and YAML
    (~0.1 s of a replay's start-up)."""
    p = Path(path)
    try:
        return p.read_text()
    except OSError as e:
        raise InputError(f"{p}: cannot read {what}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: cannot read {what}: not UTF-8 text ({e.reason})") from None
