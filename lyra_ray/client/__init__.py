"""The client side: what a user's process runs to reach a lyra cluster.

The SDK (:mod:`lyra_ray.sdk`, the public import path) and the CLI build on it: where
``lyra up`` left its token and auth mode (:mod:`.home`), packaging the submitter's code
into a job's runtime env (:mod:`.user_env`), ``ray.init`` without Ray's chatter
(:mod:`.quiet`), a run's log (:mod:`.logs`).

WHY a room of its own: this code runs on a laptop or in a ``ray job submit`` driver,
never in the scheduler actor. It imports the :mod:`lyra_ray.contract` and the model
(spec parsing), never :mod:`lyra_ray.runtime`, so a client does not load the executor,
the store or the Train machinery just to submit a job.
"""
