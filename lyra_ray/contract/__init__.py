"""What the client and the server agree on: names, labels, token places, shared errors.

WHY a room of its own: the SDK, the CLI, a job's step loop and the scheduler actor find
one another by these values, and each side must be able to import them without importing
the other (the SDK must not pull in the scheduler actor, nor the scheduler the SDK; a
job's Train loop must not pull in the executor that launched it). So nothing here imports
Ray or any other lyra package: constants and exception types only.
"""
