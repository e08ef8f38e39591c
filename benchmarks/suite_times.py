"""Where ``make test``'s time goes: per tier and per module, from pytest's JUnit XML.

Why a file and not a guess: the suite's length is a budget (CI allows 90 min; the goal is
20), and the only honest way to say which tier spends it is to read the run that spent
it. ``make test`` writes ``build/junit.xml`` and ``build/junit-alone.xml`` on every run;
this reads them and stores ``benchmarks/results/suite_times.json``, which
``docs/testing.md``'s table is rendered from (``benchmarks/_suite_table.py``).

    .venv/bin/python -m benchmarks.suite_times build/junit*.xml --note "LYRA_CI=1, idle host"

A run is appended to the results' ``runs`` (newest last), so several runs of the same
tree, under different load, sit side by side.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: the repository root on the path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._runs_file import append_run

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "suite_times.json"


def _module(classname: str) -> str:
    """``tests.ray.test_x.TestY`` -> ``tests/ray/test_x.py``."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        cand = ROOT.joinpath(*parts[:i]).with_suffix(".py")
        if cand.is_file():
            return str(cand.relative_to(ROOT))
    return classname


def _suite(path: Path) -> ET.Element:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        raise SystemExit(f"{path}: not a readable JUnit XML file ({e})") from None
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    if suite is None:
        raise SystemExit(f"{path}: no <testsuite> element")
    return suite


def read_junit(*paths: Path) -> dict[str, Any]:
    """One run's totals, per tier (the directory under ``tests/``) and per module.

    Several files are the phases of one run (``make test``: the two processes' run,
    then the ``alone`` tests): the run's wall time is from the first phase's start to
    the last one's end, so phases run one after another add up and phases run beside
    each other (a trial of that is in docs/testing.md) count once. Within a phase run
    by two processes, the tests' own seconds add up to more than its wall time."""
    suites = [_suite(p) for p in paths]
    modules: dict[str, dict[str, float]] = defaultdict(
        lambda: {"seconds": 0.0, "tests": 0, "failed": 0, "skipped": 0}
    )
    for suite in suites:
        for case in suite.iter("testcase"):
            m = modules[_module(case.get("classname", "?"))]
            m["seconds"] += float(case.get("time", "0") or 0)
            m["tests"] += 1
            if case.find("failure") is not None or case.find("error") is not None:
                m["failed"] += 1
            elif case.find("skipped") is not None:
                m["skipped"] += 1
    tiers: dict[str, dict[str, float]] = defaultdict(
        lambda: {"seconds": 0.0, "tests": 0, "modules": 0}
    )
    for mod, m in modules.items():
        parts = mod.split("/")
        tier = parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"
        t = tiers[tier]
        t["seconds"] += m["seconds"]
        t["tests"] += m["tests"]
        t["modules"] += 1

    def total(attr: str) -> int:
        return sum(int(s.get(attr, "0")) for s in suites)

    starts = [s.get("timestamp") for s in suites if s.get("timestamp")]
    return {
        "started": min(starts) if starts else None,
        "wall_s": round(_wall_s(suites), 1),
        "tests": total("tests"),
        "failures": total("failures") + total("errors"),
        "skipped": total("skipped"),
        "tiers": {k: {**v, "seconds": round(v["seconds"], 1)} for k, v in sorted(tiers.items())},
        "modules": {
            k: {**v, "seconds": round(v["seconds"], 1)}
            for k, v in sorted(modules.items(), key=lambda kv: -kv[1]["seconds"])
        },
    }


def _wall_s(suites: list[ET.Element]) -> float:
    """From the first phase's start to the last one's end; the phases' durations summed
    where a file has no start time (pytest writes one in every file it makes)."""
    spans = []
    for suite in suites:
        stamp, took = suite.get("timestamp"), float(suite.get("time", "0") or 0)
        if not stamp:
            return sum(float(x.get("time", "0") or 0) for x in suites)
        t0 = datetime.fromisoformat(stamp).timestamp()
        spans.append((t0, t0 + took))
    return max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0.0


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "junit",
        type=Path,
        nargs="+",
        help="pytest's --junitxml files of one run's phases "
        "(make test: build/junit.xml build/junit-alone.xml)",
    )
    ap.add_argument("--note", default="", help="how the run was made (load, env)")
    ap.add_argument("--replace", action="store_true", help="keep only this run")
    ap.add_argument("--commit", default=None, help="the commit the run tested (default: HEAD now)")
    args = ap.parse_args(argv)
    run = read_junit(*args.junit)
    # WHY the run's own start: a run is often recorded later, after other commits
    started = run.pop("started", None)
    at = datetime.fromisoformat(started) if started else datetime.now(UTC)
    run.update(
        note=args.note,
        commit=args.commit or _commit(),
        at=at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        host=f"{platform.system()} {platform.machine()}, Python {platform.python_version()}",
    )
    if args.replace:
        OUT.unlink(missing_ok=True)
    append_run(OUT, run)
    sys.stderr.write(
        f"{' + '.join(map(str, args.junit))}: {run['tests']} tests in {run['wall_s'] / 60:.1f} min "
        f"({run['failures']} failed) -> {OUT}\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
