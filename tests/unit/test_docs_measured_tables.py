"""No table of measured numbers in docs/ is typed in by hand.

Why: a number copied into a doc drifts from the run that produced it (docs/loaning.md
kept two reclaim latencies its JSON never held; docs/runtime.md's backfill figures went
stale). Every markdown table in ``docs/*.md`` that holds a number must sit between the
markers of a table registered in ``benchmarks/_docs_registry.py`` (rendered from its results
JSON, kept equal by ``test_docs_tables.py``), or be named in :data:`NOT_MEASURED` with
the reason it is no measurement. Numbers inside code spans (flags, file names) and
inside fenced code blocks do not count.
"""

from __future__ import annotations

import re

from benchmarks.docs_tables import ROOT, TABLES

NOT_MEASURED: dict[tuple[str, str], str] = {
    # (doc, the table's header row) -> why its numbers are no measurement
    ("docs/reliability.md", "| part | where | short (`make test`) | full |"): (
        "each chaos test's size (jobs, kills) in its short and full settings: inputs, not results"
    ),
    ("docs/reliability.md", "| fault | fix | regression test |"): (
        "faults found and their fixes; its numbers are limits of the fixes (digits refused)"
    ),
    ("docs/gavel.md", "| name | problem | solver |"): (
        "each policy's optimisation problem; numbers are the solvers' own bounds"
    ),
    ("docs/gavel.md", "| Gavel name | here | notes |"): (
        "which Gavel policy exists here; numbers are issue numbers and pruning sizes"
    ),
    ("docs/lyra.md", "| piece | file |"): "where each piece of the policy lives",
    ("docs/lyra.md", "| application | A100 | T4 |"): (
        "which data each application's speed on each GPU type comes from (GPU names)"
    ),
    ("docs/cli.md", "| flag | takes |"): "what each flag of lyra simulate reads",
    ("docs/teams.md", "| policies | the bounds enter |"): (
        "how each policy takes teams' bounds; numbers are in policy names and a solve cap"
    ),
    ("docs/moe.md", "| module | what | Ray? |"): "what each module does",
    ("docs/testing.md", "| tier | what it proves | Ray? |"): (
        "what each tier of the suite proves; numbers are in GPU names"
    ),
    ("docs/observability.md", "| metric | kind | labels | meaning |"): (
        "the exported metrics; numbers are the meaning of a value (0: none waits)"
    ),
    ("docs/observability.md", "| row | panel | query (Prometheus) |"): (
        "the dashboard's panels; numbers are quantiles a query asks for"
    ),
    ("docs/observability.md", "| variable | what it is |"): (
        "environment variables; numbers are their defaults"
    ),
    ("docs/runtime.md", "| piece | file | what it does |"): (
        "the runtime's pieces; numbers are settings (cycle period)"
    ),
    ("docs/cli.md", "| item | means |"): "the pool grammar, by example",
    ("docs/cli.md", "| field | accepted | why this bound |"): (
        "the admission bounds on a job's numbers: limits the code enforces"
    ),
    ("docs/cli.md", "| field | accepted | |"): (
        "a service's fields and the bounds the code enforces on them"
    ),
    ("docs/runtime.md", "| code | meaning |"): (
        "why-a-job-waits codes; numbers are the rules' thresholds (4-hour rule)"
    ),
}
"""Tables with numbers that are not measured. Keep it short; a table of results belongs
in the registry, never here."""

_NUMBER = re.compile(r"\d")
_CODE = re.compile(r"`[^`]*`")


def tables(text: str) -> list[tuple[int, list[str]]]:
    """Every markdown table outside fenced code and outside registered marker blocks:
    (first line number, its lines)."""
    registered = {t.marker for t in TABLES}
    out: list[tuple[int, list[str]]] = []
    fence, block = False, None
    current: list[str] = []
    start = 0
    for i, line in enumerate([*text.splitlines(), ""], 1):
        s = line.strip()
        is_row = not fence and block is None and s.startswith("|")
        if current and not is_row:
            if len(current) > 1 and re.fullmatch(r"\|[\s:|-]+\|", current[1]):
                out.append((start, current))
            current = []
        if s.startswith("```"):
            fence = not fence
        m = re.fullmatch(r"<!-- (/?)([\w-]+) -->", s)
        if m and m.group(2) in registered:
            block = None if m.group(1) else m.group(2)
        elif is_row:
            if not current:
                start = i
            current.append(s)
    return out


def holds_numbers(rows: list[str]) -> bool:
    """A body cell with a digit outside code spans (a flag or a file name is no number)."""
    return any(_NUMBER.search(_CODE.sub("", r)) for r in rows[2:])


def unrendered() -> list[tuple[str, int, str]]:
    """(doc, line, header row) of every table with numbers outside the registry."""
    found = []
    for path in sorted((ROOT / "docs").glob("*.md")):
        doc = str(path.relative_to(ROOT))
        for line, rows in tables(path.read_text()):
            if holds_numbers(rows):
                found.append((doc, line, rows[0]))
    return found


def test_every_table_of_numbers_is_rendered_from_a_results_json() -> None:
    missing = [(d, n, h) for d, n, h in unrendered() if (d, h) not in NOT_MEASURED]
    assert not missing, "tables of numbers typed into docs (register them in " + (
        "benchmarks/_docs_registry.py, rendered from a results JSON):\n"
        + "\n".join(f"{doc}:{line}: {head}" for doc, line, head in missing)
    )


def test_the_allow_list_names_only_tables_that_exist() -> None:
    stale = set(NOT_MEASURED) - {(d, h) for d, _, h in unrendered()}
    assert not stale, f"NOT_MEASURED names tables no doc has (remove them): {sorted(stale)}"


def test_the_scan_finds_a_typed_table_and_skips_a_rendered_one() -> None:
    marker = TABLES[0].marker
    text = (
        "| a | b |\n|---|---|\n| x | 1.5 s |\n\n"
        f"<!-- {marker} -->\n| a | b |\n|---|---|\n| y | 2 |\n<!-- /{marker} -->\n"
        "```\n| c | d |\n|---|---|\n| 3 | 4 |\n```\n"
        "| flag | file |\n|---|---|\n| `--n 3` | `f1.json` |\n"
    )
    found = [(line, rows[0]) for line, rows in tables(text) if holds_numbers(rows)]
    assert found == [(1, "| a | b |")]
