"""A pure, flow-level model of a cluster network and the schedulers that share it.

Why a flow-level (fluid) model: a training job's communication is a few large transfers
per step (all-reduce rings, pipeline activations, all-to-alls), so what decides its step
time is how link bandwidth is divided among concurrent flows, not packet dynamics. A
fluid model answers that exactly for piecewise-constant rates and runs fast enough for
benchmarks and the trace simulator.

- :mod:`~lyra_ray.network.topology`: servers, NICs, racks and an oversubscribed spine.
- :mod:`~lyra_ray.network.fairness`: max-min fairness by progressive filling, with
  priority classes (numpy).
- :mod:`~lyra_ray.network.flows` and :mod:`~lyra_ray.network.flowsim`: flows and
  computations with dependencies, and the event-driven fluid simulation that runs them.
- :mod:`~lyra_ray.network.schedulers`: fair sharing, Coflow (Varys), EchelonFlow.
- :mod:`~lyra_ray.network.lina`: Lina's training-side all-to-all priority.
- :mod:`~lyra_ray.network.arrangement` and the pattern builders: DP, PP, TP, FSDP, MoE.
- :mod:`~lyra_ray.network.ring`: ring all-reduce rates of placed jobs (the trace
  simulator's communication model, GADGET-style placement's objective).

Pure like the scheduling layers: no Ray, no clock, no I/O.
"""
