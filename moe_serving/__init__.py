"""Lina-style MoE serving: popularity-estimated expert replicas on Ray Serve.

Pure modules (no Ray import): ``model`` (torch MoE transformer), ``experts`` (numpy expert
FFN used by the serving replicas), ``popularity`` (path-based load estimator and the marginal
baseline), ``planner`` / ``eplb`` / ``packing`` (replica planning). ``app`` and ``cli`` are the
Ray-side entry points.
"""
