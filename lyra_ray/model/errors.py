"""Errors raised at the boundary for bad user input.

Each message names the file, line and field so that a user can fix the input without
reading a traceback; the CLI turns :class:`InputError` into exit code 2.
"""


class InputError(ValueError):
    """Bad user input: a job spec, a trace line, a cluster spec or a config field."""
