"""Operations: starting and stopping clusters, not scheduling them.

``lyra up`` / ``lyra down`` (:mod:`.local`), the in-process cluster that tests, benchmarks
and the demo start (:mod:`.embedded`), and the Prometheus beside it (:mod:`.prometheus`).

WHY a room of its own: this code runs once, before the scheduler exists or after it is
gone, on the operator's machine. Kept apart from :mod:`lyra_ray.runtime` (the scheduler
actor, the executor, the store), a change to how a cluster starts cannot reach what runs
in it, and the runtime never imports start-up code. It may import the runtime (it starts
the scheduler) and the client (it writes the token a client reads); nothing below imports it.
"""
