"""The project's own modules import one another without a cycle, and its rooms downward.

Three checks, each proven on a planted violation first: no cycle between modules; no
cycle between packages (two rooms whose modules import each other's, even without a
module cycle); the model imports nothing of ours above it; and no pure module reads a
file outside its own package (``find_spec`` / ``importlib.resources`` on another
package, or a path climbing out of its folder from ``__file__``).

Every import counts, those inside functions too: a function-level import that closes a
cycle still ties the two modules together, and only hides the cycle until the day the
import moves to the top. Imports under ``if TYPE_CHECKING:`` never run and are skipped.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_purity import PURE_PACKAGES

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


def package_of(module: str) -> str:
    """The room a module lives in: ``lyra_ray.<room>`` (``lyra_ray.sdk`` is one by itself)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which rooms import which: a module-level graph collapsed onto packages."""
    out: dict[str, set[str]] = {}
    for a, bs in graph.items():
        pa = package_of(a)
        out.setdefault(pa, set()).update(package_of(b) for b in bs if package_of(b) != pa)
    return out


def test_the_package_check_finds_a_planted_package_cycle() -> None:
    """No module cycle, yet two rooms leaning on each other: train -> runtime -> train."""
    graph = import_graph()
    planted = {k: set(v) for k, v in graph.items()}
    planted["lyra_ray.train.storage"].add("lyra_ray.runtime.store")
    assert cycles(planted) == cycles(graph)  # the module walk alone does not see it
    found = cycles(package_graph(planted))
    assert any({"lyra_ray.runtime", "lyra_ray.train"} <= set(c) for c in found)


def test_no_import_cycle_between_the_project_packages() -> None:
    """Each room imports only rooms below it (``../shared/ARCHITECTURE.md``, "Rooms")."""
    found = cycles(package_graph(import_graph()))
    assert found == [], f"package cycles: {found}"


MODEL = "lyra_ray.model"


def reach_ups(graph: dict[str, set[str]], low: str = MODEL) -> list[str]:
    """Imports from the package ``low`` into any other package of ours."""
    return sorted(
        f"{a} -> {b}"
        for a, bs in graph.items()
        if package_of(a) == low
        for b in bs
        if package_of(b) != low
    )


def test_the_layer_check_finds_a_planted_reach_up() -> None:
    planted = {k: set(v) for k, v in import_graph().items()}
    planted["lyra_ray.model.throughput"].add("lyra_ray.jobs.catalogue_loop")
    assert reach_ups(planted) == ["lyra_ray.model.throughput -> lyra_ray.jobs.catalogue_loop"]


def test_the_model_imports_nothing_of_ours_above_it() -> None:
    assert reach_ups(import_graph()) == []


PURE_ROOMS = PURE_PACKAGES
"""The pure packages (the Makefile's PURE): they read no file but their own package's data."""
_FINDERS = {"find_spec", "find_module", "files", "as_file", "open_text", "read_text", "path"}
"""importlib(.util, .resources) calls that locate a file through another package's name."""


def _climb(node: ast.expr) -> int | None:
    """Directories ``node`` climbs above the file it names, if it starts at ``__file__``:
    ``Path(__file__).parent`` climbs 1, ``.parents[2]`` 3, ``os.path.dirname`` once each."""
    if isinstance(node, ast.Name) and node.id == "__file__":
        return 0
    if isinstance(node, ast.Call):
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
        if name in {"Path", "resolve", "absolute", "realpath", "abspath"} and node.args:
            return _climb(node.args[0])
        if name in {"resolve", "absolute"} and isinstance(f, ast.Attribute):
            return _climb(f.value)
        if name == "dirname" and node.args:
            up = _climb(node.args[0])
            return None if up is None else up + 1
    if isinstance(node, ast.Attribute) and node.attr == "parent":
        up = _climb(node.value)
        return None if up is None else up + 1
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "parents"
        and isinstance(node.slice, ast.Constant)
    ):
        up = _climb(node.value.value)
        return None if up is None else up + 1 + int(node.slice.value)
    return None


def outside_reads(source: str, module: str, depth: int) -> list[str]:
    """Ways a module of a pure package finds files outside its own package.

    ``depth``: how many folders the module's file sits below its package's folder (0 for
    ``lyra_ray/model/scaling.py``). Flags a path built from ``__file__`` that climbs above
    the package's folder, and an importlib lookup (``find_spec``, ``resources.files``, ...)
    naming any package but its own: either reads a file another package or the repository
    owns, which an installed copy may not have where the module looks (the scaling curves
    were found through ``find_spec("policies")`` only when run from the repository).
    """
    own = package_of(module)
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        up = _climb(node) if isinstance(node, ast.expr) else None
        if up is not None and up > depth + 1:
            found.append(f"{module}:{node.lineno}: climbs {up} folders from __file__")
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            via_importlib = name == "find_spec" or (
                isinstance(f, ast.Attribute) and "importlib" in ast.unparse(f.value)
            )
            if name in _FINDERS and via_importlib and node.args:
                arg = node.args[0]
                target = arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg)
                mine = target in {"__name__", "__package__"} or (
                    isinstance(target, str) and package_of(target) == own
                )
                if not mine:
                    found.append(f"{module}:{node.lineno}: {name}({target!r})")
    return found


def test_the_file_check_finds_planted_reads_outside_the_package() -> None:
    planted = [
        'importlib.util.find_spec("policies")',
        'importlib.resources.files("lyra_ray.policies") / "lyra" / "curves.json"',
        'Path(__file__).parent.parent / "policies" / "curves.json"',
        'Path(__file__).resolve().parents[2] / "benchmarks" / "results"',
        "os.path.dirname(os.path.dirname(__file__))",
    ]
    for expr in planted:
        assert outside_reads(f"x = {expr}\n", "lyra_ray.model.scaling", 0), expr
    own = [
        'Path(__file__).parent / "data" / "curves.json"',
        'importlib.resources.files(__package__) / "data"',
        'importlib.resources.files("lyra_ray.model") / "data"',
    ]
    for expr in own:
        assert outside_reads(f"x = {expr}\n", "lyra_ray.model.scaling", 0) == [], expr
    # one folder deeper, one more climb stays inside the package
    assert outside_reads("x = Path(__file__).parents[1]\n", "lyra_ray.policies.lyra.mckp", 1) == []


def test_pure_modules_read_no_file_outside_their_package() -> None:
    found: list[str] = []
    for name, path in _modules().items():
        if package_of(name) not in PURE_ROOMS:
            continue
        folder = ROOT / {v: k for k, v in FOLDERS.items()}.get(
            package_of(name), package_of(name).replace(".", "/")
        )
        depth = len(path.relative_to(folder).parts) - 1
        found += outside_reads(path.read_text(), name, depth)
    assert found == [], found
