"""The ``lyra`` command line: ``simulate`` (the simulator), ``up``/``submit``/``status``
and friends (a live cluster), ``moe`` (MoE serving). :func:`main` is the entry point."""

from lyra_ray.cli.main import main

__all__ = ["main"]
