"""Errors that cross from the scheduler actor to a client.

WHY here: the scheduler raises :class:`AuthError`, Ray carries it to the caller, and the
SDK and the CLI catch it by type; both sides import the class from this module, so the
client never imports the server's user table to name it.
"""


class AuthError(PermissionError):
    """A call without a valid token, or one its caller may not make. Nothing changed."""
