"""The simulator's compiled core: the pure scheduling modules built by mypyc, used only
where the build matches the source byte for byte.

Why: a replay runs the scheduling core tens of thousands of times (one cycle per event,
one round every six simulated minutes), and in CPython most of that time is the
interpreter's, not the decisions'. mypyc compiles the very same typed modules to C
extensions (the source is unchanged, and so is every decision: ``tests/sim/
test_native.py`` compares whole reports), which makes a replay ~1.3x faster.

Why only the simulator: the live scheduler runs in Ray workers that pickle these objects
across processes and is not where the time goes (its cycle waits on SQLite and Ray), so
it keeps the interpreted modules, and so do the tests (several patch the core's methods,
which compiled classes forbid). ``lyra simulate`` calls :func:`activate` before it
imports the core.

Why the manifest: an extension module shadows its ``.py``, so a build left behind by an
edit would run the old code. ``scripts/build_native.py`` writes the build under
``build/native/`` (never next to the sources) with every source's SHA-256, and
:func:`activate` uses the build only when every hash still matches and none of its
modules is imported yet; otherwise it says why and the interpreted modules run.
``LYRA_NATIVE=0`` turns it off.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
"""The checkout (an editable install): the sources' root and the build's."""

BUILD_DIR = ROOT / "build" / "native"
MANIFEST = "manifest.json"

MODULES: tuple[str, ...] = (
    "lyra_ray.scheduling.backfill",
    "lyra_ray.scheduling.core",
    "lyra_ray.scheduling.decider",
    "lyra_ray.scheduling.diff",
    "lyra_ray.scheduling.interfaces",
    "lyra_ray.scheduling.loop",
    "lyra_ray.scheduling.round_greedy",
    "lyra_ray.scheduling.round_state",
    "lyra_ray.scheduling.rounds",
    "lyra_ray.scheduling.state",
    "lyra_ray.scheduling.type_order",
    "lyra_ray.scheduling.waiting",
    "lyra_ray.sim.events",
    "lyra_ray.sim.metrics",
    "lyra_ray.sim.runtime",
    "lyra_ray.sim.simulator",
    "lyra_ray.model.state",
    "lyra_ray.model.throughput",
    "lyra_ray.model.mixed",
    "lyra_ray.model.scaling",
    "lyra_ray.model.restart_cost",
    "lyra_ray.placement.placer",
    "lyra_ray.placement.reclaim",
    "lyra_ray.placement.ring",
    "lyra_ray.telemetry.values",
)
"""What is compiled: the modules a replay spends its time in. Not the policies (their
classes subclass an interpreted base through a registry decorator, and their time is in
numpy and the LP solver), not ``lyra_ray.model.types`` (imported by every CLI command
before ``simulate`` is known), not package ``__init__`` files (docstrings only). A class
defined outside this list may not subclass one inside it: the equivalence test runs
every policy to catch that."""


def source_path(module: str, root: Path = ROOT) -> Path:
    """``lyra_ray.placement.placer`` -> ``<root>/lyra_ray/placement/placer.py`` (through
    the package's symbolic link, as the import system sees it)."""
    return root.joinpath(*module.split(".")).with_suffix(".py")


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class Build:
    """A manifest read back: which extension file serves each module name."""

    directory: Path
    files: dict[str, Path]
    """Module name (the compiled modules and mypyc's shared library) -> extension file."""
    sources: dict[str, str]
    """Compiled module -> SHA-256 of the source it was built from."""


def read_build(directory: Path = BUILD_DIR) -> Build | None:
    """The build's manifest, or None where there is no build (or it is unreadable)."""
    try:
        doc = json.loads((directory / MANIFEST).read_text())
        files = {str(k): directory / str(v) for k, v in doc["files"].items()}
        sources = {str(k): str(v) for k, v in doc["sources"].items()}
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as e:
        log.debug("no usable native build in %s: %s", directory, e)
        return None
    return Build(directory, files, sources)


def stale_reason(build: Build, root: Path = ROOT, *, this_process: bool = True) -> str | None:
    """Why this build may not run here, or None where every piece matches.
    ``this_process=False`` asks only whether it matches the source (for a fresh process,
    as the equivalence test starts), not whether this one has its modules loaded."""
    if set(build.sources) != set(MODULES):
        return "it was built from another list of modules"
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    for path in build.files.values():
        if not path.name.endswith(suffixes):
            return f"{path.name} is not an extension of this interpreter"
        if not path.is_file():
            return f"{path} is missing"
    for module, digest in build.sources.items():
        src = source_path(module, root)
        if not src.is_file() or source_hash(src) != digest:
            return f"{src.relative_to(root)} changed since the build (make native)"
    loaded = sorted(m for m in build.files if m in sys.modules) if this_process else []
    if loaded:
        return f"{loaded[0]} is already imported"
    return None


class _Finder(importlib.abc.MetaPathFinder):
    """Serves exactly the manifest's module names from their extension files."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


_active: Build | None = None


def activate(directory: Path = BUILD_DIR) -> bool:
    """Serve the compiled core to this process's imports, where the build matches the
    source; returns whether it does. Idempotent; a no-op under ``LYRA_NATIVE=0``."""
    global _active
    if _active is not None:
        return True
    if os.environ.get("LYRA_NATIVE", "1") == "0":
        return False
    build = read_build(directory)
    if build is None:
        return False
    why = stale_reason(build)
    if why is not None:
        log.info("the compiled core is not used: %s", why)
        return False
    sys.meta_path.insert(0, _Finder(build.files))
    _active = build
    return True


def active() -> bool:
    """Whether this process imports the compiled core."""
    return _active is not None
