"""The project's own modules import one another without a cycle.

Every import counts, those inside functions too: a function-level import that closes a
cycle still ties the two modules together, and only hides the cycle until the day the
import moves to the top. Imports under ``if TYPE_CHECKING:`` never run and are skipped.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {
    "lyra_ray": "lyra_ray",
    "policies": "lyra_ray.policies",
    "placement": "lyra_ray.placement",
    "moe_serving": "lyra_ray.moe_serving",
    "jobs": "lyra_ray.jobs",
}
"""The card's top-level folders and the names they are installed under (pyproject.toml)."""


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for folder, package in FOLDERS.items():
        for f in sorted((ROOT / folder).rglob("*.py")):
            parts = [package, *f.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = f
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.AST, here: str, is_pkg: bool, mods: set[str]) -> set[str]:
    """Project modules an AST imports, relative imports resolved, TYPE_CHECKING skipped.

    ``from pkg import sub`` depends on ``pkg.sub`` where that is a module, else on
    ``pkg``; like every checker of import cycles, a submodule's implicit import of its
    parent packages is not counted (a package re-exporting its modules would otherwise
    be a cycle by construction).
    """
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")
                keep = len(parts) - node.level + (1 if is_pkg else 0)
                base = ".".join(parts[:keep] + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                names.add(sub if sub in mods else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names & mods


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        graph[name] = _imported(ast.parse(path.read_text()), name, is_pkg, set(mods)) - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_the_walker_sees_the_project_and_finds_a_planted_cycle() -> None:
    graph = import_graph()
    assert "lyra_ray.scheduling.core" in graph["lyra_ray.sim.simulator"]
    assert len(graph) > 80
    planted = {k: set(v) for k, v in graph.items()}
    planted["lyra_ray.model.types"].add("lyra_ray.sim.simulator")
    assert any("lyra_ray.model.types" in c for c in cycles(planted))


def test_no_import_cycle_between_the_project_modules() -> None:
    found = cycles(import_graph())
    assert found == [], f"import cycles: {found}"


def test_the_card_folders_are_imported_only_under_the_project_namespace() -> None:
    """A bare ``import jobs`` would pick up a user's own ``jobs/`` from a working dir."""
    bare = set(FOLDERS) - {"lyra_ray"}
    found = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                heads = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                heads = [node.module.split(".")[0]]
            else:
                continue
            found += [f"{name}: {h}" for h in heads if h in bare]
    assert found == []


def test_every_card_folder_is_linked_into_the_namespace() -> None:
    for folder, package in FOLDERS.items():
        if folder != "lyra_ray":
            link = ROOT / "lyra_ray" / package.split(".")[1]
            assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link
