"""A parallelism planner: how to train a large model on ``n`` GPUs of one type.

Pure (no Ray, no clock, no I/O). Given a model (a transformer spec or a list of layers
with their costs), a global batch and the GPUs, :func:`plan` searches tensor, pipeline
and data parallel degrees, the microbatch size, the pipeline schedule (GPipe, 1F1B,
interleaved 1F1B), activation recomputation and the stage partition, and ranks the plans
by predicted iteration time. The model and its limits are in ``docs/planner.md``.

:func:`layer_time_s` is the per-layer cost every plan sums; :func:`constants_for` gives
the numbers it uses for a GPU type (fitted to measurements for H200, defaults elsewhere).
"""

# registers the planner that sizes a job's `model:` with the spec parser (model/plugins.py)
from lyra_ray.parallelism import spec_plan as _spec_plan  # noqa: F401
from lyra_ray.parallelism.cost import Constants, ProfiledTimes, constants_for, layer_time_s
from lyra_ray.parallelism.hardware import CATALOGUE, GpuSpec, gpu_spec
from lyra_ray.parallelism.layers import LayerCost, ModelSpec, layer_list
from lyra_ray.parallelism.plan import Plan, PlanOptions
from lyra_ray.parallelism.schedule import bubble_fraction, pipeline_time
from lyra_ray.parallelism.search import plan
from lyra_ray.parallelism.transformer import ZOO, Transformer, transformer_layers, zoo_model

__all__ = [
    "CATALOGUE",
    "ZOO",
    "Constants",
    "GpuSpec",
    "LayerCost",
    "ModelSpec",
    "Plan",
    "PlanOptions",
    "ProfiledTimes",
    "Transformer",
    "bubble_fraction",
    "constants_for",
    "gpu_spec",
    "layer_list",
    "layer_time_s",
    "pipeline_time",
    "plan",
    "transformer_layers",
    "zoo_model",
]
