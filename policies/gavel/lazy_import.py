"""SciPy's sparse matrices, imported when a policy first builds one.

WHY: every Gavel policy module is imported to register its name, and ``scipy.sparse``
takes about 0.1 s to import (most of it SciPy's array-API layer). A replay under a
policy that never builds a sparse matrix (FIFO, Gandiva, the baselines) or a CLI
command that only lists the policies paid it at every start: about 5 % of a whole
``lyra simulate`` of Gavel's 3,000-job trace under ``fifo_perf``
(``benchmarks/sim_speed.py``). The modules keep ``sp.csr_matrix(...)`` as written; the
type checker sees the real module.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    """Stands for a module until an attribute is read, then imports it (once)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        module = self._module
        if module is None:
            module = self._module = importlib.import_module(self._name)
        return getattr(module, attr)


def lazy_module(name: str) -> Any:
    """``name`` as a :class:`LazyModule` (typed ``Any``: callers annotate with the real
    module under ``TYPE_CHECKING``)."""
    return LazyModule(name)
