"""Errors that cross from the scheduler actor to a client.

WHY here: the scheduler raises :class:`AuthError`, Ray carries it to the caller, and the
SDK and the CLI catch it by type; both sides import the class from this module, so the
client never imports the server's user table to name it. :class:`LyraError` lives here
too (the SDK raises it, on the client side only) so that the CLI's entry point can catch
it without importing Ray.
"""


class AuthError(PermissionError):
    """A call without a valid token, or one its caller may not make. Nothing changed."""


class LyraError(RuntimeError):
    """The scheduler is unreachable, did not answer in time, or refused a request that is
    not a spec error."""
