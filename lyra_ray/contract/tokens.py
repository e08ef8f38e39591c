"""Where a lyra token travels: the environment variables and the file a client reads.

WHY shared: the scheduler's refusal names the variables a user should set, ``lyra up``
writes the first admin's token to the file, and the SDK and the CLI read it back; a
rename on one side alone would leave every message or lookup pointing nowhere.
"""

TOKEN_ENV = "LYRA_TOKEN"
"""The caller's token, if set: it wins over every file."""
TOKEN_FILE_ENV = "LYRA_TOKEN_FILE"
"""A file holding the caller's token; when set, the only file read."""
TOKEN_FILE = "token"
"""Under ``LYRA_HOME``: the token the CLI and SDK use when ``LYRA_TOKEN`` is unset
(``lyra up --local`` writes its first admin's there, mode 0600)."""
