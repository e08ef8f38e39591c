"""Plug-in points of the model layer: code above it that the model's parsers call.

WHY: the model imports nothing of ours above it (``tests/unit/test_import_graph.py``
checks it). A job that names a model (``model:``) is sized by the parallelism planner,
which sits above the model (it raises the model's errors and reads its types); so the
planner registers itself here when :mod:`lyra_ray.parallelism` is imported (the package
``lyra_ray`` does so, once, for every process), and :func:`lyra_ray.model.spec.parse_job_spec`
calls whatever is registered. A model job parsed with no planner registered is refused
naming the field, never sized by a guess.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from lyra_ray.model.errors import InputError


class ModelPlanner(Protocol):
    """Sizes a job that names a model: (steps/s per GPU type and worker count, the job's
    config with the planned model kept). Raises :class:`InputError` naming the field."""

    def __call__(
        self,
        raw: Any,
        config: dict[str, Any],
        lo: int,
        hi: int,
        source: str,
        known_gpu_types: Iterable[str] | None,
    ) -> tuple[dict[str, dict[int, float]], dict[str, Any]]: ...


_planner: list[ModelPlanner] = []
"""At most one: the last registered (a list, so that no ``global`` statement is needed)."""


def register_model_planner(planner: ModelPlanner) -> None:
    """Install the planner that sizes ``model:`` jobs (replaces any earlier one)."""
    _planner[:] = [planner]


def plan_model(
    raw: Any,
    config: dict[str, Any],
    lo: int,
    hi: int,
    source: str,
    known_gpu_types: Iterable[str] | None,
) -> tuple[dict[str, dict[int, float]], dict[str, Any]]:
    """A model job's steps/s per GPU type and size, and its config with the model kept."""
    if not _planner:
        raise InputError(
            f"{source}: field 'model': no parallelism planner is installed "
            "(import lyra_ray.parallelism)"
        )
    return _planner[0](raw, config, lo, hi, source, known_gpu_types)
